package image

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// multiarchTriplets are Debian's multiarch library directory names by GOARCH.
var multiarchTriplets = map[string]string{
	"amd64":   "x86_64-linux-gnu",
	"arm64":   "aarch64-linux-gnu",
	"386":     "i386-linux-gnu",
	"arm":     "arm-linux-gnueabihf",
	"ppc64le": "powerpc64le-linux-gnu",
	"s390x":   "s390x-linux-gnu",
	"riscv64": "riscv64-linux-gnu",
}

// libraryDirs are the directories the dynamic loader searches when an object names no
// run path, in its order: Debian's multiarch directories, then the classic ones.
func libraryDirs() []string {
	var dirs []string
	if t, ok := multiarchTriplets[runtime.GOARCH]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// libraryClosure resolves what the ELF objects need to run on this host: their
// interpreter (PT_INTERP) and the shared libraries they name (DT_NEEDED), found as the
// dynamic loader would (DT_RUNPATH or DT_RPATH, then the system directories),
// recursively. extra names libraries that are loaded at run time rather than linked
// (the NSS modules); they are found and followed the same way. It returns the paths
// as found (through the host's symbolic links, e.g. /lib/x86_64-linux-gnu/libc.so.6),
// sorted by discovery.
func libraryClosure(objects []string, extra []string) ([]string, error) {
	var (
		out   []string
		seen  = map[string]bool{} // paths in out
		queue []string            // objects to read
	)
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
			queue = append(queue, p)
		}
	}
	var class elf.Class
	var machine elf.Machine
	for i, obj := range objects {
		f, err := elf.Open(obj)
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", obj, err)
		}
		if i == 0 {
			class, machine = f.Class, f.Machine
		}
		interp, err := interpreter(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", obj, err)
		}
		if interp != "" {
			add(interp)
		}
		queue = append(queue, obj)
	}
	for _, lib := range extra {
		p, err := findLibrary(lib, nil, class, machine)
		if err != nil {
			return nil, err
		}
		add(p)
	}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		needed, runpath, err := dynamicInfo(obj)
		if err != nil {
			return nil, err
		}
		for _, lib := range needed {
			if strings.Contains(lib, "/") {
				add(lib)
				continue
			}
			p, err := findLibrary(lib, expandOrigin(runpath, filepath.Dir(obj)), class, machine)
			if err != nil {
				return nil, fmt.Errorf("%s needs %w", obj, err)
			}
			add(p)
		}
	}
	return out, nil
}

func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// dynamicInfo returns obj's DT_NEEDED names and its run path directories.
func dynamicInfo(obj string) (needed, runpath []string, err error) {
	f, err := elf.Open(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("read ELF %s: %w", obj, err)
	}
	defer f.Close()
	needed, err = f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("read ELF %s: %w", obj, err)
	}
	rp, _ := f.DynString(elf.DT_RUNPATH)
	if len(rp) == 0 {
		rp, _ = f.DynString(elf.DT_RPATH)
	}
	for _, s := range rp {
		runpath = append(runpath, filepath.SplitList(s)...)
	}
	return needed, runpath, nil
}

func expandOrigin(dirs []string, origin string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		d = strings.ReplaceAll(d, "${ORIGIN}", origin)
		out = append(out, strings.ReplaceAll(d, "$ORIGIN", origin))
	}
	return out
}

// findLibrary looks for lib in runpath then the system directories, skipping files of
// another ELF class or machine (a 32-bit library of the same name, say).
func findLibrary(lib string, runpath []string, class elf.Class, machine elf.Machine) (string, error) {
	for _, dir := range append(append([]string{}, runpath...), libraryDirs()...) {
		p := filepath.Join(dir, lib)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := class == elf.ELFCLASSNONE || (f.Class == class && f.Machine == machine)
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("shared library %s, not found in %s", lib, strings.Join(append(runpath, libraryDirs()...), ", "))
}
