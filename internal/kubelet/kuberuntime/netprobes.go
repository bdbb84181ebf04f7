package kuberuntime

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/version"
)

// maxProbeBody is how much of an HTTP probe's response body is read.
const maxProbeBody = 10 << 10

// userAgent is the User-Agent of probes ("probe") and hooks ("lifecycle") unless the
// spec sets one.
func userAgent(purpose string) string {
	return fmt.Sprintf("kube-%s/%s.%s", purpose, version.Major, version.Minor)
}

// resolvePort is the port number a probe or hook names: a number, or the name of one of
// the container's ports (or a number written as a string).
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return -1, err
			}
			port = n
		}
	}
	if port <= 0 || port >= 65536 {
		return port, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}

// httpGetRequest is the GET request of an httpGet probe or hook: scheme (http by
// default), host (podIP by default), port, path, the spec's headers (Host among them),
// User-Agent kube-<purpose>/<version> and Accept */* unless the spec sets them (an empty
// Accept drops it).
func httpGetRequest(ctx context.Context, get *corev1.HTTPGetAction, c *corev1.Container, podIP, purpose string) (*http.Request, error) {
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := get.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(get.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(get.Path)
	if err != nil {
		u = &url.URL{Path: get.Path}
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range get.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", userAgent(purpose))
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// httpClient is a client whose connections are made by dial: no keep-alives, TLS
// without verification, redirects followed only on the same host (at most 10).
func httpClient(dial dialFunc, timeout time.Duration) *http.Client {
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true, TLSHandshakeTimeout: timeout,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // probes and hooks do not verify certificates
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// httpProbe GETs the probe's URL through dial: a status in [200, 400) passes (a redirect
// to another host is not followed and passes with a warning); any other status fails
// with "HTTP probe failed with statuscode: <code>", and so does a request that fails.
func httpProbe(ctx context.Context, dial dialFunc, get *corev1.HTTPGetAction, c *corev1.Container, podIP string, timeout time.Duration) (kubelet.ProbeResult, string, error) {
	req, err := httpGetRequest(ctx, get, c, podIP, "probe")
	if err != nil {
		return kubelet.ProbeFailure, "", err
	}
	client := httpClient(dial, timeout)
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		return kubelet.ProbeFailure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxProbeBody))
	if err != nil {
		return kubelet.ProbeFailure, "", err
	}
	switch {
	case res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusMultipleChoices:
		return kubelet.ProbeSuccess, string(b), nil
	case res.StatusCode >= http.StatusMultipleChoices && res.StatusCode < http.StatusBadRequest:
		return kubelet.ProbeWarning, fmt.Sprintf("Probe terminated redirects, Response body: %s", b), nil
	}
	return kubelet.ProbeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// tcpProbe passes when a TCP connection to host:port opens within timeout.
func tcpProbe(ctx context.Context, dial dialFunc, host string, port int, timeout time.Duration) (kubelet.ProbeResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return kubelet.ProbeFailure, err.Error(), nil
	}
	_ = conn.Close()
	return kubelet.ProbeSuccess, "", nil
}

// grpcProbe calls grpc.health.v1.Health/Check for service on host:port within timeout:
// SERVING passes; anything else (another status, no health service, no answer) fails.
func grpcProbe(ctx context.Context, dial dialFunc, host, service string, port int, timeout time.Duration) (kubelet.ProbeResult, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent("probe")),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }))
	if err != nil {
		return kubelet.ProbeFailure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return kubelet.ProbeFailure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
		case codes.DeadlineExceeded:
			return kubelet.ProbeFailure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		case codes.Unavailable:
			return kubelet.ProbeFailure, fmt.Sprintf("error: failed to connect service at %q: %s", addr, st.Message()), nil
		}
		return kubelet.ProbeFailure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return kubelet.ProbeFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return kubelet.ProbeSuccess, "service healthy", nil
}
