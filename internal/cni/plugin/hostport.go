package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/cni/ipam"
	"github.com/kubelab/kubelab/internal/util/flock"
	"github.com/kubelab/kubelab/internal/util/hostport"
)

// HostPortTable is the nftables table (family ip) of the pods' hostPorts, in the node's
// namespace.
const HostPortTable = "kubelab-hostports"

const (
	// hostPortMap sends a packet for a node-local address (but loopback ones) to the chain
	// of the pod that holds its protocol and port on every address of the node.
	hostPortMap = "hostports"
	// hostIPPortMap sends a packet for a node-local address to the chain of the pod that
	// holds its protocol and port on that address (a hostPort with a hostIP, which may be
	// a loopback one); it is looked at first.
	hostIPPortMap = "hostip-ports"
	// masqueradeMark marks a pod's packets to its own hostPort, masqueraded on the way
	// back to it (so that its answer comes back through the node, not straight to itself).
	masqueradeMark = "0x2000"
	// hostPortMarkerDir (under dataDir) holds one file per attachment that has hostPort
	// rules, written before the rules: DEL and GC know which chains to remove without
	// asking nft about every pod. Its lock orders the plugin processes that change the
	// rules.
	hostPortMarkerDir = "hostports"
)

// hostPortsTx adds to tx the table's base chains and maps, and chain, the chain of one
// attachment, DNATing each of ports on a node-local address to podIP. The maps' elements
// are created, not added: a port another pod holds in the same way fails the
// transaction.
func hostPortsTx(tx *knftables.Transaction, chain, containerID string, podIP netip.Addr, ports []PortMapping) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("hostPorts of the pods of kubelab-cni")})
	tx.Add(&knftables.Map{Name: hostPortMap, Type: "inet_proto . inet_service : verdict"})
	tx.Add(&knftables.Map{Name: hostIPPortMap, Type: "ipv4_addr . inet_proto . inet_service : verdict"})
	dispatch := []string{
		fmt.Sprintf("fib daddr type local ip daddr . meta l4proto . th dport vmap @%s", hostIPPortMap),
		fmt.Sprintf("fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @%s", hostPortMap),
	}
	base := []struct {
		name     string
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
		rules    []string
	}{
		// Packets from elsewhere (other nodes, the node's pods) and from the node itself.
		{"prerouting", knftables.PreroutingHook, knftables.DNATPriority, dispatch},
		{"output", knftables.OutputHook, knftables.DNATPriority, dispatch},
		{"postrouting", knftables.PostroutingHook, knftables.SNATPriority, []string{"meta mark & " + masqueradeMark + " != 0 masquerade"}},
	}
	for _, b := range base {
		tx.Add(&knftables.Chain{Name: b.name, Type: knftables.PtrTo(knftables.NATType), Hook: &b.hook, Priority: &b.priority})
		tx.Flush(&knftables.Chain{Name: b.name})
		for _, r := range b.rules {
			tx.Add(&knftables.Rule{Chain: b.name, Rule: r})
		}
	}

	tx.Add(&knftables.Chain{Name: chain, Comment: knftables.PtrTo("hostPorts of container " + containerID)})
	tx.Flush(&knftables.Chain{Name: chain})
	keys := map[hostPortKey]bool{}
	for _, pm := range ports {
		match := ""
		if pm.HostIP != "" {
			match = "ip daddr " + pm.HostIP + " "
		}
		match += fmt.Sprintf("%s dport %d", pm.Protocol, pm.HostPort)
		tx.Add(&knftables.Rule{Chain: chain, Rule: fmt.Sprintf("%s ip saddr %s meta mark set meta mark | %s", match, podIP, masqueradeMark)})
		tx.Add(&knftables.Rule{Chain: chain, Rule: fmt.Sprintf("%s dnat to %s:%d", match, podIP, pm.ContainerPort)})
		keys[keyOf(pm)] = true
	}
	for _, k := range sortedKeys(keys) {
		tx.Create(k.element(chain))
	}
}

// hostPortKey is a map element's key: a hostPort on an address (ip) or on every one ("").
type hostPortKey struct {
	ip, protocol string
	port         int
}

func keyOf(pm PortMapping) hostPortKey {
	return hostPortKey{ip: pm.HostIP, protocol: pm.Protocol, port: pm.HostPort}
}

// element is the map element sending k's packets to chain.
func (k hostPortKey) element(chain string) *knftables.Element {
	if k.ip == "" {
		return &knftables.Element{Map: hostPortMap, Key: []string{k.protocol, strconv.Itoa(k.port)}, Value: []string{"goto " + chain}}
	}
	return &knftables.Element{Map: hostIPPortMap, Key: []string{k.ip, k.protocol, strconv.Itoa(k.port)}, Value: []string{"goto " + chain}}
}

// String is "[ip:]port/protocol".
func (k hostPortKey) String() string {
	if k.ip == "" {
		return fmt.Sprintf("%d/%s", k.port, k.protocol)
	}
	return fmt.Sprintf("%s:%d/%s", k.ip, k.port, k.protocol)
}

func (k hostPortKey) hostPort() hostport.Port { return hostport.New(k.ip, k.protocol, int32(k.port)) }

// removeHostPortsTx adds to tx the removal of chain and of the maps' elements (out of
// elements, the maps' current ones) that lead to it. The table must exist.
func removeHostPortsTx(tx *knftables.Transaction, chain string, elements []*knftables.Element) {
	for _, e := range elements {
		if slices.Equal(e.Value, []string{"goto " + chain}) {
			tx.Delete(&knftables.Element{Map: e.Map, Key: e.Key})
		}
	}
	tx.Add(&knftables.Chain{Name: chain})
	tx.Flush(&knftables.Chain{Name: chain})
	tx.Delete(&knftables.Chain{Name: chain})
}

// setupHostPorts DNATs the attachment's hostPorts to podIP, unless another pod holds one
// of them (the same protocol and port, on the same hostIP or with either on every
// address). Rules left by an earlier ADD of the same attachment are removed first.
func (p *Plugin) setupHostPorts(ctx context.Context, conf *NetConf, a ipam.Attachment, podIP netip.Addr) error {
	chain := hostPortChain(a.ContainerID, a.IfName)
	nft, err := p.cfg.NFTables()
	if err != nil {
		return err
	}
	unlock, err := lockHostPorts(ctx, conf.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	marker := filepath.Join(conf.DataDir, hostPortMarkerDir, chain)
	if _, err := os.Stat(marker); err == nil {
		if err := removeHostPortRules(ctx, nft, chain); err != nil {
			return fmt.Errorf("remove earlier rules: %w", err)
		}
	}
	held, err := heldHostPorts(ctx, nft, chain)
	if err != nil {
		return err
	}
	if taken := takenHostPorts(conf.ports, held); taken != "" {
		return fmt.Errorf("hostPort %s already used by another pod on this node", taken)
	}
	if err := os.WriteFile(marker, []byte(a.ContainerID+"\n"+a.IfName+"\n"), 0o600); err != nil {
		return err
	}
	tx := nft.NewTransaction()
	hostPortsTx(tx, chain, a.ContainerID, podIP, conf.ports)
	return nft.Run(ctx, tx)
}

// lockHostPorts takes the lock of the node's hostPort rules (the marker directory, made
// when missing) and returns its release.
func lockHostPorts(ctx context.Context, dataDir string) (unlock func(), err error) {
	dir := filepath.Join(dataDir, hostPortMarkerDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := flock.Exclusive(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("lock hostPort rules: %w", err)
	}
	return func() { _ = l.Unlock() }, nil
}

// heldHostPorts are the hostPorts the maps send to chains other than chain.
func heldHostPorts(ctx context.Context, nft knftables.Interface, chain string) ([]hostPortKey, error) {
	elements, err := listHostPortElements(ctx, nft)
	if err != nil {
		return nil, err
	}
	var held []hostPortKey
	for _, e := range elements {
		if slices.Equal(e.Value, []string{"goto " + chain}) {
			continue
		}
		var k hostPortKey
		key := e.Key
		if e.Map == hostIPPortMap && len(key) == 3 {
			k.ip, key = key[0], key[1:]
		}
		if len(key) != 2 {
			continue
		}
		k.protocol = key[0]
		k.port, _ = strconv.Atoi(key[1])
		held = append(held, k)
	}
	return held, nil
}

// takenHostPorts names the ports of ports that conflict with one of held.
func takenHostPorts(ports []PortMapping, held []hostPortKey) string {
	heldPorts := make([]hostport.Port, 0, len(held))
	for _, h := range held {
		heldPorts = append(heldPorts, h.hostPort())
	}
	var taken []string
	for _, pm := range ports {
		if k := keyOf(pm); len(hostport.Taken([]hostport.Port{k.hostPort()}, heldPorts)) > 0 {
			taken = append(taken, k.String())
		}
	}
	return strings.Join(taken, ", ")
}

// listHostPortElements lists the elements of both maps; a map that does not exist (yet)
// has none.
func listHostPortElements(ctx context.Context, nft knftables.Interface) ([]*knftables.Element, error) {
	var out []*knftables.Element
	for _, m := range []string{hostPortMap, hostIPPortMap} {
		els, err := nft.ListElements(ctx, "map", m)
		if knftables.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", m, err)
		}
		out = append(out, els...)
	}
	return out, nil
}

// teardownHostPorts removes the hostPort rules of the attachment whose chain is chain, if
// it has a marker or force says it had hostPorts; then the marker.
func (p *Plugin) teardownHostPorts(ctx context.Context, dataDir, chain string, force bool) error {
	marker := filepath.Join(dataDir, hostPortMarkerDir, chain)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) && !force {
		return nil
	}
	nft, err := p.cfg.NFTables()
	if err != nil {
		return err
	}
	unlock, err := lockHostPorts(ctx, dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := removeHostPortRules(ctx, nft, chain); err != nil {
		return err
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// hostPortMarkers returns the chain and attachment of every marker under dataDir.
func hostPortMarkers(dataDir string) (map[string]ipam.Attachment, error) {
	dir := filepath.Join(dataDir, hostPortMarkerDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	markers := map[string]ipam.Attachment{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "hostport-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		id, ifName, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		markers[e.Name()] = ipam.Attachment{ContainerID: id, IfName: ifName}
	}
	return markers, nil
}

// removeHostPortRules removes chain and the map elements leading to it; a missing table
// means there is nothing to remove.
func removeHostPortRules(ctx context.Context, nft knftables.Interface, chain string) error {
	if _, err := nft.List(ctx, "chains"); knftables.IsNotFound(err) {
		return nil
	}
	elements, err := listHostPortElements(ctx, nft)
	if err != nil {
		return err
	}
	tx := nft.NewTransaction()
	removeHostPortsTx(tx, chain, elements)
	return nft.Run(ctx, tx)
}

func sortedKeys(m map[hostPortKey]bool) []hostPortKey {
	keys := make([]hostPortKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b hostPortKey) int {
		if c := strings.Compare(a.ip, b.ip); c != 0 {
			return c
		}
		if c := strings.Compare(a.protocol, b.protocol); c != 0 {
			return c
		}
		return a.port - b.port
	})
	return keys
}
