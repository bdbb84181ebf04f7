package loadbalancer

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestPlaneTCPUDP runs a TCP_UDP listener in front of a target that answers on one port
// over both, then closes it with Apply.
func TestPlaneTCPUDP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("UDP port %d is taken: %v", port, err)
	}
	defer pc.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "tcp %s", line)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("udp "), buf[:n]...), from)
		}
	}()
	p := New(Config{})
	defer p.Close()
	addr := fmt.Sprintf("127.%d.%d.%d", 128+rand.IntN(127), rand.IntN(256), 1+rand.IntN(254))
	spec := Spec{
		LoadBalancers: []LoadBalancer{{ARN: "lb", Type: "network", Addr: addr, Listeners: []Listener{{ARN: "l", Port: 53, Protocol: "TCP_UDP",
			Rules: []Rule{{Action: Action{Forward: []WeightedTargetGroup{{ARN: "tg", Weight: 1}}}}}}}}},
		TargetGroups: []TargetGroup{{ARN: "tg", HealthCheck: HealthCheck{Protocol: "TCP", Interval: time.Hour, Timeout: time.Second, Healthy: 2, Unhealthy: 2},
			Targets: []Target{{Key: "t:1", Addr: ln.Addr().String(), Health: Health{State: "healthy"}}}}},
	}
	if err := p.Apply(spec); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr+":53", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintln(c, "hello")
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "tcp hello\n" {
		t.Errorf("TCP through the listener: %q %v", got, err)
	}
	c.Close()
	u, err := net.Dial("udp", addr+":53")
	if err != nil {
		t.Fatal(err)
	}
	u.SetDeadline(time.Now().Add(5 * time.Second))
	u.Write([]byte("hi"))
	buf := make([]byte, 100)
	n, err := u.Read(buf)
	u.Close()
	if err != nil || string(buf[:n]) != "udp hi" {
		t.Errorf("UDP through the listener: %q %v", buf[:n], err)
	}
	if h, ok := p.TargetHealth("tg", "t:1"); !ok || h.State != "healthy" {
		t.Errorf("target health %+v %v", h, ok)
	}
	if err := p.Apply(Spec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", addr+":53", time.Second); err == nil {
		t.Errorf("the removed listener still answers")
	}
}
