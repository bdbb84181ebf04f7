package kuberuntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// Runtime is the kubelet's container runtime over CRI v1.
type Runtime struct {
	cfg Config
	rs  runtimeapi.RuntimeServiceClient
	is  runtimeapi.ImageServiceClient
	log *slog.Logger

	// crashBackOff delays restarts of crashed containers (key: uid/name/hash);
	// pullBackOff delays pulls after failures (key: uid/image/<image>).
	crashBackOff, pullBackOff *backOff

	mu sync.Mutex
	// waiting holds, per pod and container, why the last attempt to start the container
	// failed; a successful start clears it.
	waiting map[types.UID]map[string]waitReason
	// actuated holds, per pod and container, what the runtime last applied to the
	// container's newest instance (resize.go).
	actuated map[types.UID]map[string]actuation

	// nodeHostsFile is the node's hosts file, which host-network pods get (/etc/hosts
	// unless a test sets it).
	nodeHostsFile string

	// dialPod connects from inside a pod's network namespace (dialInNetNS unless a test
	// sets it).
	dialPod func(ctx context.Context, nsPath, network, addr string) (net.Conn, error)
}

var _ kubelet.Runtime = (*Runtime)(nil)

// New returns the runtime of one node, speaking CRI through rs and is.
func New(cfg Config, rs runtimeapi.RuntimeServiceClient, is runtimeapi.ImageServiceClient) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if rs == nil || is == nil {
		return nil, errors.New("kuberuntime: runtime and image service clients are required")
	}
	cfg.defaults()
	return &Runtime{
		cfg: cfg, rs: rs, is: is, log: cfg.Logger.With("node", cfg.NodeName),
		crashBackOff:  newBackOff(cfg.Clock, cfg.RestartBackOff, cfg.MaxRestartBackOff),
		pullBackOff:   newBackOff(cfg.Clock, cfg.ImagePullBackOff, cfg.MaxImagePullBackOff),
		waiting:       map[types.UID]map[string]waitReason{},
		actuated:      map[types.UID]map[string]actuation{},
		nodeHostsFile: etcHostsPath,
	}, nil
}

// Ready asks the runtime for its status: it is ready when both its RuntimeReady and
// NetworkReady conditions are true.
func (r *Runtime) Ready(ctx context.Context) error {
	resp, err := r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("container runtime is down: %w", err)
	}
	conds := map[string]*runtimeapi.RuntimeCondition{}
	for _, c := range resp.GetStatus().GetConditions() {
		conds[c.GetType()] = c
	}
	for _, want := range []struct{ cond, what string }{
		{runtimeapi.RuntimeReady, "container runtime not ready"},
		{runtimeapi.NetworkReady, "container runtime network not ready"},
	} {
		c, ok := conds[want.cond]
		if !ok {
			return fmt.Errorf("%s: %s condition missing", want.what, want.cond)
		}
		if !c.GetStatus() {
			return fmt.Errorf("%s: %s=false reason:%s message:%s", want.what, want.cond, c.GetReason(), c.GetMessage())
		}
	}
	return nil
}

// Version asks the runtime for its name and version (CRI Version), as upstream's
// kubelet reports them: "<RuntimeName>://<RuntimeVersion>", e.g. "containerd://1.6.20".
func (r *Runtime) Version(ctx context.Context) (string, error) {
	resp, err := r.rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("container runtime version: %w", err)
	}
	return resp.GetRuntimeName() + "://" + resp.GetRuntimeVersion(), nil
}

// Relist lists every pod that has a sandbox with a fingerprint of its sandboxes' and
// containers' ids and states.
func (r *Runtime) Relist(ctx context.Context) (map[types.UID]string, error) {
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	parts := map[types.UID][]string{}
	for _, s := range sbs.GetItems() {
		uid := types.UID(s.GetLabels()[labelPodUID])
		if uid == "" {
			uid = types.UID(s.GetMetadata().GetUid())
		}
		if uid == "" {
			continue
		}
		parts[uid] = append(parts[uid], "s/"+s.GetId()+"/"+s.GetState().String())
	}
	for _, c := range cs.GetContainers() {
		uid := types.UID(c.GetLabels()[labelPodUID])
		if _, ok := parts[uid]; !ok {
			continue
		}
		parts[uid] = append(parts[uid], "c/"+c.GetId()+"/"+c.GetState().String())
	}
	out := make(map[types.UID]string, len(parts))
	for uid, ps := range parts {
		sort.Strings(ps)
		sum := sha256.Sum256([]byte(strings.Join(ps, "\n")))
		out[uid] = hex.EncodeToString(sum[:12])
	}
	return out, nil
}

// reasons is a copy of the pod's waiting reasons.
func (r *Runtime) reasons(uid types.UID) map[string]waitReason {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]waitReason, len(r.waiting[uid]))
	for k, v := range r.waiting[uid] {
		out[k] = v
	}
	return out
}

func (r *Runtime) setReason(uid types.UID, name, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting[uid] == nil {
		r.waiting[uid] = map[string]waitReason{}
	}
	r.waiting[uid][name] = waitReason{reason: reason, message: message}
}

func (r *Runtime) clearReason(uid types.UID, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiting[uid], name)
}

// forget drops what the runtime remembers of a pod (waiting reasons, back-offs, what it
// applied to its containers).
func (r *Runtime) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.waiting, uid)
	delete(r.actuated, uid)
	r.mu.Unlock()
	r.crashBackOff.forget(string(uid) + "/")
	r.pullBackOff.forget(string(uid) + "/")
}
