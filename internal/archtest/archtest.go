package archtest

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Module is kubelab's module path; the rule is about its packages.
const Module = "github.com/kubelab/kubelab"

// Graph maps each package of the module, by path relative to the module
// ("internal/kubelet"), to the packages of the module it imports in non-test code.
type Graph map[string][]string

// Kind is what a package is under the rule.
type Kind int

const (
	// Leaf packages import no component and no composer.
	Leaf Kind = iota
	// Component packages import no other component and no composer.
	Component
	// Composer packages may import anything.
	Composer
)

// components are the components whose packages all sit under one directory.
var components = []string{
	"internal/apiserver", "internal/scheduler", "internal/kubelet", "internal/csi/driver",
	"internal/cloud", "internal/cni", "internal/proxy", "internal/netpol", "internal/overlay",
	"internal/dns", "internal/vpc", "internal/ipamd", "internal/natgateway", "internal/image", "internal/containerd", "internal/trace",
	"internal/podidentitywebhook",
}

// componentParents are directories each of whose subdirectories is a component of its
// own (every controller, every CSI sidecar), except the shared helpers named in
// sharedHelpers.
var componentParents = []string{"internal/controller", "internal/csi/sidecar"}

// sharedHelpers are leaves that sit among components: the controllers' shared
// expectations and test helpers.
var sharedHelpers = map[string]bool{
	"internal/controller/expectations":   true,
	"internal/controller/controllertest": true,
}

// composers are the packages that put components together.
var composers = []string{"internal/cluster", "internal/app", "internal/controllermanager", "internal/cloudcontrollermanager", "cmd"}

// allowed are the imports between components the rule accepts, each with its reason.
var allowed = map[[2]string]string{
	{"internal/controller/replication", "internal/controller/replicaset"}: "the replication controller is the replicaset controller run over ReplicationControllers, as upstream's is",
}

// under says whether pkg is dir or inside it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// Classify says what pkg (a path relative to the module) is, and for a component its
// name: the directory of the component it belongs to ("internal/kubelet" for
// internal/kubelet/pluginmanager).
func Classify(pkg string) (Kind, string) {
	for _, c := range composers {
		if under(pkg, c) {
			return Composer, c
		}
	}
	for _, c := range components {
		if under(pkg, c) {
			return Component, c
		}
	}
	for _, parent := range componentParents {
		rest, ok := strings.CutPrefix(pkg, parent+"/")
		if !ok {
			continue
		}
		name := parent + "/" + strings.SplitN(rest, "/", 2)[0]
		if sharedHelpers[name] {
			return Leaf, name
		}
		return Component, name
	}
	return Leaf, pkg
}

// Violation is one import the rule refuses.
type Violation struct {
	// From and To are the importing and the imported package.
	From, To string
	// Reason is the error's text: the pair of components (or the leaf and the
	// component) and the rule it breaks.
	Reason string
}

func (v Violation) Error() string { return v.Reason }

// Check applies the rule to g and returns its violations, sorted.
func Check(g Graph) []Violation {
	var out []Violation
	for from, imports := range g {
		fromKind, fromName := Classify(from)
		if fromKind == Composer {
			continue
		}
		for _, to := range imports {
			toKind, toName := Classify(to)
			if v, ok := violation(from, fromKind, fromName, to, toKind, toName); ok {
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

// violation says whether from (of kind fromKind, named fromName) may not import to.
func violation(from string, fromKind Kind, fromName, to string, toKind Kind, toName string) (Violation, bool) {
	pair := fmt.Sprintf("%s imports %s", fromName, toName)
	if from != fromName || to != toName {
		pair += fmt.Sprintf(" (%s imports %s)", from, to)
	}
	switch {
	case toKind == Composer:
		return Violation{from, to, pair + ": only the composers import the composers"}, true
	case toKind != Component || toName == fromName:
		return Violation{}, false
	case fromKind == Leaf:
		return Violation{from, to, pair + ": a leaf imports no component"}, true
	}
	if _, ok := allowed[[2]string{fromName, toName}]; ok {
		return Violation{}, false
	}
	return Violation{from, to, pair + ": components meet only on the wire"}, true
}

// Load reads the import graph of the module whose root directory is root: each
// directory holding Go files for this platform, with the imports of its non-test files
// that name the module's packages. testdata and hidden directories are skipped.
func Load(root string) (Graph, error) {
	g := Graph{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); dir != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(dir, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read package %s: %w", dir, err)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		var imports []string
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, Module+"/"); ok {
				imports = append(imports, r)
			}
		}
		g[filepath.ToSlash(rel)] = imports
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load import graph of %s: %w", root, err)
	}
	return g, nil
}

// ModuleRoot finds the root of the module from dir upwards: the directory whose go.mod
// declares Module.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+Module+"\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s above %s", Module, dir)
		}
	}
}
