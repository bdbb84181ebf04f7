package ipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrBusy is returned when the store's lock was not obtained before the context ended:
// another plugin process holds it.
var ErrBusy = errors.New("ipam store is busy")

// ExhaustedError says that every allocatable address of a subnet is taken.
type ExhaustedError struct {
	Subnet netip.Prefix
	InUse  int
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no free address in %s: all %d in use", e.Subnet, e.InUse)
}
