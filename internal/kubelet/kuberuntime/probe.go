package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

var _ kubelet.ContainerProber = (*Runtime)(nil)

// execGrace is how much longer than a command's own timeout an ExecSync call may take
// (the runtime's cleanup) before the call itself is abandoned.
const execGrace = 2 * time.Second

// errExecTimeout: the command did not finish within its timeout.
var errExecTimeout = errors.New("command timed out")

// Probe runs one probe of container c (containerID as the status shows it) of pod: exec
// through CRI ExecSync within timeoutSeconds (exit code 0 passes); httpGet, tcpSocket
// and grpc from inside the pod's network namespace (see httpProbe, tcpProbe,
// grpcProbe). It implements kubelet.ContainerProber.
func (r *Runtime) Probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, containerID string, p *corev1.Probe) (kubelet.ProbeResult, string, error) {
	id := runtimeID(containerID)
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	if p.Exec != nil {
		out, code, err := r.execSync(ctx, id, p.Exec.Command, timeout)
		switch {
		case errors.Is(err, errExecTimeout):
			return kubelet.ProbeFailure, fmt.Sprintf("command %q timed out after %s", strings.Join(p.Exec.Command, " "), timeout), nil
		case err != nil:
			return kubelet.ProbeFailure, "", err
		case code != 0:
			return kubelet.ProbeFailure, out, nil
		}
		return kubelet.ProbeSuccess, out, nil
	}
	if p.HTTPGet == nil && p.TCPSocket == nil && p.GRPC == nil {
		return kubelet.ProbeFailure, "", fmt.Errorf("missing probe handler for %s:%s", podFullName(pod), c.Name)
	}
	n, err := r.containerNetwork(ctx, id)
	if err != nil {
		return kubelet.ProbeFailure, "", err
	}
	switch {
	case p.HTTPGet != nil:
		return httpProbe(ctx, n.dial, p.HTTPGet, c, n.ip, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return kubelet.ProbeFailure, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = n.ip
		}
		return tcpProbe(ctx, n.dial, host, port, timeout)
	}
	service := ""
	if p.GRPC.Service != nil {
		service = *p.GRPC.Service
	}
	return grpcProbe(ctx, n.dial, n.ip, service, int(p.GRPC.Port), timeout)
}

// runtimeID is the runtime's id of a container from its status id
// ("containerd://<id>").
func runtimeID(containerID string) string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		return id
	}
	return containerID
}

// execSync runs cmd in container id and returns its output (stdout, then stderr) and exit
// code; timeout 0 lets it run as long as ctx lasts. A command that outlives its timeout
// is errExecTimeout.
func (r *Runtime) execSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (string, int32, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+execGrace)
		defer cancel()
	}
	resp, err := r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(timeout / time.Second)})
	if err != nil {
		// containerd reports a command that outlived its timeout as "timeout … exceeded".
		msg := grpcMessage(err)
		if status.Code(err) == codes.DeadlineExceeded || (timeout > 0 && strings.Contains(msg, "timeout") && strings.Contains(msg, "exceeded")) {
			return "", -1, errExecTimeout
		}
		return "", -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	return string(resp.GetStdout()) + string(resp.GetStderr()), resp.GetExitCode(), nil
}
