package app

import (
	"os"
	"path/filepath"
)

// DefaultDataDir is where kubelab keeps its state unless --data-dir says otherwise: the
// same for every command of this user (defaultDataDir).
var DefaultDataDir = defaultDataDir(os.Geteuid(), os.Getenv)

// rootDataDir is root's data dir.
const rootDataDir = "/var/lib/kubelab"

// defaultDataDir picks the data dir of a user of euid whose environment getenv reads:
// $KUBELAB_DATA_DIR when set; root's /var/lib/kubelab; else the user's own,
// $XDG_DATA_HOME/kubelab (when absolute, as the XDG Base Directory spec wants), else
// $HOME/.local/share/kubelab; without a home, root's.
func defaultDataDir(euid int, getenv func(string) string) string {
	if dir := getenv("KUBELAB_DATA_DIR"); dir != "" {
		return dir
	}
	if euid == 0 {
		return rootDataDir
	}
	if xdg := getenv("XDG_DATA_HOME"); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "kubelab")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "share", "kubelab")
	}
	return rootDataDir
}
