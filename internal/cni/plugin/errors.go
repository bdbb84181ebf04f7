package plugin

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// The plugin's own error codes (the CNI spec leaves 100 and above to plugins); doc.go
// lists every code the plugin returns.
const (
	// CodeNodeNetwork: a link, address or route in the node's or the pod's namespace
	// could not be made, read or removed.
	CodeNodeNetwork uint = 100
	// CodeInterfaceExists: CNI_IFNAME already exists in CNI_NETNS.
	CodeInterfaceExists uint = 101
	// CodeRangeFull: every address of the node's subnet is allocated.
	CodeRangeFull uint = 102
	// CodeStore: the IPAM store (dataDir) could not be read or written.
	CodeStore uint = 103
	// CodeHostPort: the pod's hostPorts could not be set up or removed, or one is taken.
	CodeHostPort uint = 104
	// CodeCheckFailed: CHECK found the attachment unlike what ADD set up.
	CodeCheckFailed uint = 105
	// CodeIPAMD: the node's IP address manager (VPC mode) could not be reached or failed.
	CodeIPAMD uint = 106
)

// cniErrorf is a CNI error of code whose message says everything: the runtime shows it
// in the pod's events.
func cniErrorf(code uint, format string, a ...any) *types.Error {
	return types.NewError(code, fmt.Sprintf(format, a...), "")
}

// ipamError is the CNI error of a failed IPAM store operation: the exhausted range with
// its own clear message, a busy store as "try again later", anything else a store failure.
func ipamError(what string, err error) *types.Error {
	var ex *ipam.ExhaustedError
	switch {
	case errors.As(err, &ex):
		return types.NewError(CodeRangeFull, ex.Error(), "")
	case errors.Is(err, ipam.ErrBusy):
		return cniErrorf(types.ErrTryAgainLater, "%s: %v", what, err)
	default:
		return cniErrorf(CodeStore, "%s: %v", what, err)
	}
}
