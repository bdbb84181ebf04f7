package cluster

import (
	"strings"
	"testing"
)

// TestConfigNeedsKubelabBinaryForAddonPods: real nodes running the add-on as pods need the
// binary its image is built from; in process, or on hollow nodes, they do not.
func TestConfigNeedsKubelabBinaryForAddonPods(t *testing.T) {
	missing := "/nonexistent/kubelab"
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Nodes: 1, KubelabBinary: missing}, true},
		{Config{Nodes: 1, KubelabBinary: missing, CSIInProcess: true}, false},
		{Config{Nodes: 1, KubelabBinary: missing, Hollow: true}, false},
	} {
		c.cfg.DataDir = t.TempDir()
		c.cfg.setDefaults()
		err := c.cfg.validate()
		if got := err != nil && strings.Contains(err.Error(), missing); got != c.want {
			t.Errorf("validate(hollow %v, in process %v) = %v; want an error naming %s: %v", c.cfg.Hollow, c.cfg.CSIInProcess, err, missing, c.want)
		}
	}
}
