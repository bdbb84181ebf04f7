package overlay

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/testutil"
)

// BenchmarkPodToPodTCP measures one TCP stream from a pod on node A to a pod on
// node B, across the VXLAN overlay and across direct routes (MB/s of payload,
// counted once the receiver has read it all).
func BenchmarkPodToPodTCP(b *testing.B) {
	for _, mode := range []string{ModeVXLAN, ModeDirect} {
		b.Run(mode, func(b *testing.B) { benchPodToPod(b, mode) })
	}
}

func benchPodToPod(b *testing.B, mode string) {
	tn := newTestNet(b, 2)
	na, nb := tn.nodes[0], tn.nodes[1]
	client := fake.NewClientset(na.nodeObject(), nb.nodeObject())
	for _, n := range tn.nodes {
		startAgent(b, Config{NodeName: n.name, NetNS: n.netns.Path(), Mode: mode, Logger: slog.New(slog.DiscardHandler)}, client)
	}
	for _, c := range []struct{ on, to *testNode }{{na, nb}, {nb, na}} {
		testutil.EventuallyWithin(b, 10*time.Second, "route on "+c.on.name, func() error {
			if r, err := findRoute(c.on.h, c.to.podCIDR); err != nil || r == nil {
				return fmt.Errorf("no route to %s (%v)", c.to.podCIDR, err)
			}
			return nil
		})
	}

	l := listenIn(b, nb.pod, nb.podIP.String()+":0")
	received := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		received <- n
	}()
	var conn net.Conn
	testutil.EventuallyWithin(b, 10*time.Second, "connect pod A to pod B", func() error {
		var err error
		conn, err = dialIn(na.pod, l.Addr().String())
		return err
	})
	defer conn.Close()

	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		b.Fatal(err)
	}
	select {
	case n := <-received:
		b.StopTimer()
		if n != int64(b.N)*int64(len(buf)) {
			b.Fatalf("received %d bytes, sent %d", n, int64(b.N)*int64(len(buf)))
		}
	case <-time.After(time.Minute):
		b.Fatal("receiver did not finish")
	}
}
