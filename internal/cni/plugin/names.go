package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// attachmentHash is 8 hex digits of a hash of a container id and interface name: the
// names of what the plugin makes for that attachment in the node's namespace.
func attachmentHash(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifName))
	return hex.EncodeToString(sum[:4])
}

// HostVethName is the name of the node's end of an attachment's veth pair, "veth" and 8
// hex digits: DEL finds it again from the container id and interface name alone.
func HostVethName(containerID, ifName string) string {
	return "veth" + attachmentHash(containerID, ifName)
}

// isHostVethName says whether name is of the form HostVethName makes.
func isHostVethName(name string) bool {
	if len(name) != 12 || !strings.HasPrefix(name, "veth") {
		return false
	}
	for _, c := range name[4:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// hostPortChain is the nftables chain of an attachment's hostPorts.
func hostPortChain(containerID, ifName string) string {
	return "hostport-" + attachmentHash(containerID, ifName)
}

// VPCHostVethName is the name of the node's end of an attachment's veth pair in VPC
// mode: "eni" and 8 hex digits, aws-node's prefix (no bridge holds them: DEL and GC
// find them by name alone).
func VPCHostVethName(containerID, ifName string) string {
	return "eni" + attachmentHash(containerID, ifName)
}

// isVPCHostVethName says whether name is of the form VPCHostVethName makes.
func isVPCHostVethName(name string) bool {
	return len(name) == 11 && strings.HasPrefix(name, "eni") && isHex(name[3:])
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
