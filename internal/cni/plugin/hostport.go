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
)

// HostPortTable is the nftables table (family ip) of the pods' hostPorts, in the node's
// namespace.
const HostPortTable = "kubelab-hostports"

const (
	// hostPortMap sends a packet for a node-local address to the chain of the pod that
	// holds its protocol and port.
	hostPortMap = "hostports"
	// masqueradeMark marks a pod's packets to its own hostPort, masqueraded on the way
	// back to it (so that its answer comes back through the node, not straight to itself).
	masqueradeMark = "0x2000"
	// hostPortMarkerDir (under dataDir) holds one file per attachment that has hostPort
	// rules, written before the rules: DEL and GC know which chains to remove without
	// asking nft about every pod.
	hostPortMarkerDir = "hostports"
)

// hostPortsTx adds to tx the table's base chains and map, and chain, the chain of one
// attachment, DNATing each of ports on a node-local address to podIP. The map's elements
// are created, not added: a hostPort another pod holds fails the transaction.
func hostPortsTx(tx *knftables.Transaction, chain, containerID string, podIP netip.Addr, ports []PortMapping) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("hostPorts of the pods of kubelab-cni")})
	tx.Add(&knftables.Map{Name: hostPortMap, Type: "inet_proto . inet_service : verdict"})
	dispatch := fmt.Sprintf("fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @%s", hostPortMap)
	base := []struct {
		name     string
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
		rule     string
	}{
		// Packets from elsewhere (other nodes, the node's pods) and from the node itself.
		{"prerouting", knftables.PreroutingHook, knftables.DNATPriority, dispatch},
		{"output", knftables.OutputHook, knftables.DNATPriority, dispatch},
		{"postrouting", knftables.PostroutingHook, knftables.SNATPriority, "meta mark & " + masqueradeMark + " != 0 masquerade"},
	}
	for _, b := range base {
		tx.Add(&knftables.Chain{Name: b.name, Type: knftables.PtrTo(knftables.NATType), Hook: &b.hook, Priority: &b.priority})
		tx.Flush(&knftables.Chain{Name: b.name})
		tx.Add(&knftables.Rule{Chain: b.name, Rule: b.rule})
	}

	tx.Add(&knftables.Chain{Name: chain, Comment: knftables.PtrTo("hostPorts of container " + containerID)})
	tx.Flush(&knftables.Chain{Name: chain})
	keys := map[[2]string]bool{}
	for _, pm := range ports {
		match := ""
		if pm.HostIP != "" {
			match = "ip daddr " + pm.HostIP + " "
		}
		match += fmt.Sprintf("%s dport %d", pm.Protocol, pm.HostPort)
		tx.Add(&knftables.Rule{Chain: chain, Rule: fmt.Sprintf("%s ip saddr %s meta mark set meta mark | %s", match, podIP, masqueradeMark)})
		tx.Add(&knftables.Rule{Chain: chain, Rule: fmt.Sprintf("%s dnat to %s:%d", match, podIP, pm.ContainerPort)})
		keys[[2]string{pm.Protocol, strconv.Itoa(pm.HostPort)}] = true
	}
	for _, k := range sortedKeys(keys) {
		tx.Create(&knftables.Element{Map: hostPortMap, Key: []string{k[0], k[1]}, Value: []string{"goto " + chain}})
	}
}

// removeHostPortsTx adds to tx the removal of chain and of the map's elements (out of
// elements, the map's current ones) that lead to it. The table must exist.
func removeHostPortsTx(tx *knftables.Transaction, chain string, elements []*knftables.Element) {
	for _, e := range elements {
		if slices.Equal(e.Value, []string{"goto " + chain}) {
			tx.Delete(&knftables.Element{Map: hostPortMap, Key: e.Key})
		}
	}
	tx.Add(&knftables.Chain{Name: chain})
	tx.Flush(&knftables.Chain{Name: chain})
	tx.Delete(&knftables.Chain{Name: chain})
}

// setupHostPorts DNATs the attachment's hostPorts to podIP. Rules left by an earlier ADD
// of the same attachment are removed first.
func (p *Plugin) setupHostPorts(ctx context.Context, conf *NetConf, a ipam.Attachment, podIP netip.Addr) error {
	chain := hostPortChain(a.ContainerID, a.IfName)
	nft, err := p.cfg.NFTables()
	if err != nil {
		return err
	}
	marker := filepath.Join(conf.DataDir, hostPortMarkerDir, chain)
	if _, err := os.Stat(marker); err == nil {
		if err := removeHostPortRules(ctx, nft, chain); err != nil {
			return fmt.Errorf("remove earlier rules: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(a.ContainerID+"\n"+a.IfName+"\n"), 0o600); err != nil {
		return err
	}
	tx := nft.NewTransaction()
	hostPortsTx(tx, chain, a.ContainerID, podIP, conf.ports)
	err = nft.Run(ctx, tx)
	if err != nil && knftables.IsAlreadyExists(err) {
		if taken := takenHostPorts(ctx, nft, chain, conf.ports); taken != "" {
			return fmt.Errorf("hostPort %s already used by another pod on this node", taken)
		}
	}
	return err
}

// takenHostPorts names the ports of ports that lead to a chain other than chain.
func takenHostPorts(ctx context.Context, nft knftables.Interface, chain string, ports []PortMapping) string {
	elements, err := nft.ListElements(ctx, "map", hostPortMap)
	if err != nil {
		return ""
	}
	var taken []string
	for _, pm := range ports {
		for _, e := range elements {
			if slices.Equal(e.Key, []string{pm.Protocol, strconv.Itoa(pm.HostPort)}) && !slices.Equal(e.Value, []string{"goto " + chain}) {
				taken = append(taken, fmt.Sprintf("%d/%s", pm.HostPort, pm.Protocol))
			}
		}
	}
	return strings.Join(taken, ", ")
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
// or map means there is nothing to remove.
func removeHostPortRules(ctx context.Context, nft knftables.Interface, chain string) error {
	elements, err := nft.ListElements(ctx, "map", hostPortMap)
	if knftables.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", hostPortMap, err)
	}
	tx := nft.NewTransaction()
	removeHostPortsTx(tx, chain, elements)
	return nft.Run(ctx, tx)
}

func sortedKeys(m map[[2]string]bool) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		na, _ := strconv.Atoi(a[1])
		nb, _ := strconv.Atoi(b[1])
		return na - nb
	})
	return keys
}
