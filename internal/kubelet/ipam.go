package kubelet

import (
	"fmt"
	"net/netip"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// podIPs hands out pod addresses from the node's podCIDR: the network address and the
// first host (the bridge's gateway, as on cni0) and the broadcast address are never given.
type podIPs struct {
	mu     sync.Mutex
	prefix netip.Prefix
	byPod  map[types.UID]netip.Addr
	used   map[netip.Addr]types.UID
}

func newPodIPs() *podIPs {
	return &podIPs{byPod: map[types.UID]netip.Addr{}, used: map[netip.Addr]types.UID{}}
}

func (p *podIPs) setCIDR(cidr string) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.prefix = prefix.Masked()
	p.mu.Unlock()
}

// hasCIDR says whether the node has a podCIDR yet.
func (p *podIPs) hasCIDR() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prefix.IsValid()
}

// reserve records an address a running pod already has (after a restart).
func (p *podIPs) reserve(uid types.UID, ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byPod[uid], p.used[a] = a, uid
}

// allocate returns the pod's address, allocating the lowest free one.
func (p *podIPs) allocate(uid types.UID) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[uid]; ok {
		return a.String(), nil
	}
	if !p.prefix.IsValid() {
		return "", fmt.Errorf("node has no podCIDR")
	}
	a, err := nextFree(p.prefix, p.used)
	if err != nil {
		return "", err
	}
	p.byPod[uid], p.used[a] = a, uid
	return a.String(), nil
}

// nextFree is the lowest host address of prefix not in used, skipping network, gateway and
// broadcast.
func nextFree(prefix netip.Prefix, used map[netip.Addr]types.UID) (netip.Addr, error) {
	a := prefix.Addr().Next().Next() // network, gateway
	for ; prefix.Contains(a); a = a.Next() {
		if !prefix.Contains(a.Next()) && a.Is4() {
			break // broadcast
		}
		if _, taken := used[a]; !taken {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod CIDR %s is exhausted", prefix)
}

func (p *podIPs) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[uid]; ok {
		delete(p.used, a)
		delete(p.byPod, uid)
	}
}
