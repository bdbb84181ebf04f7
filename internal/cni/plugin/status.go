package plugin

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// Status says whether the plugin can serve ADD: STATUS. It can when its configuration is
// valid (else code 7) and its dataDir is writable (else code 50, "not available").
func (p *Plugin) Status(args *skel.CmdArgs) error {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := checkWritable(conf.DataDir); err != nil {
		return cniErrorf(types.ErrPluginNotAvailable, "kubelab-cni is not available: data dir %s is not writable: %v", conf.DataDir, err)
	}
	return nil
}

// checkWritable makes dir if needed and writes and removes a file in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".status-*")
	if err != nil {
		return err
	}
	_ = f.Close()
	return os.Remove(f.Name())
}
