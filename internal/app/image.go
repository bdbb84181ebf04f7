package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/kubelab/kubelab/internal/image"
)

// imagesDir is the image registry's directory within a data dir.
func imagesDir(dataDir string) string { return filepath.Join(dataDir, "images") }

// newImageCommand is `kubelab image`: the images the nodes' containerd pull from
// kubelab's registry.
func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the images kubelab's registry serves to the nodes",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newImageImportCommand(), newImageBuildCommand(), newImageTagCommand())
	return cmd
}

func newImageImportCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Import images from a `docker save` or OCI layout tarball into the running kubelab",
		Long: `Import the images of FILE into the image registry of the running kubelab, which every
node's containerd uses as the mirror of all registries: a pod may then use them by the
names they carry in FILE (docker.io/library/app:1.0, quay.io/org/tool:2, …).

FILE is a ` + "`docker save`" + ` tarball (every RepoTag is imported) or an OCI image layout tarball
(entries named by the annotation org.opencontainers.image.ref.name or
io.containerd.image.name, as ` + "`ctr images export`" + ` writes), possibly gzip-compressed.
The images are also kept in DATA-DIR/images/layout, so the registry serves them again
after a restart.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := imagesDir(dataDir)
			addr, err := runningRegistry(dataDir)
			if err != nil {
				return err
			}
			refs, err := image.Import(cmd.Context(), addr, image.LayoutDir(dir), args[0])
			if err != nil {
				return registryError(err, dataDir)
			}
			for _, ref := range refs {
				fmt.Fprintf(cmd.OutOrStdout(), "imported %s\n", ref)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir, "kubelab's data directory (the registry's state is in DATA-DIR/images)")
	return cmd
}

// runningRegistry is the address of the registry of the kubelab with dataDir.
func runningRegistry(dataDir string) (string, error) {
	dir := imagesDir(dataDir)
	addr, err := image.RecordedAddr(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no kubelab image registry has run with data dir %s (no %s): start `kubelab up` first", dataDir, image.AddrFile(dir))
	}
	return addr, err
}

// registryError says, when no registry answered, which address was tried and why.
func registryError(err error, dataDir string) error {
	if errors.Is(err, image.ErrNoRegistry) {
		return fmt.Errorf("%w (the address recorded in %s): is `kubelab up` running with data dir %s?", err, image.AddrFile(imagesDir(dataDir)), dataDir)
	}
	return err
}

func newImageBuildCommand() *cobra.Command {
	var (
		dataDir, user, workdir     string
		files, env, expose, labels []string
		entrypoint, command        []string
		busybox                    bool
	)
	cmd := &cobra.Command{
		Use:   "build REF [REF...]",
		Short: "Build an image from this machine's files into the running kubelab",
		Long: `Build a one-layer image from files of this machine and serve it from the image registry
of the running kubelab under each REF, as imported images are (kept in
DATA-DIR/images/layout, served again after a restart). No container engine is needed.

Each --file SRC[:DEST] puts the host file or directory SRC at DEST (default: the same
path). A dynamically linked executable brings its loader and shared libraries, found as
the dynamic loader finds them, with glibc's NSS modules for users and hosts. --busybox
adds Debian's busybox-static as /bin/busybox with its applets: a shell and the usual
tools. /etc/passwd and /etc/group hold root and nobody unless a --file gives them.`,
		Example: `  kubelab image build example.com/web:1 --busybox --file ./site:/www \
    --entrypoint httpd --cmd=-f,-p,80,-h,/www --expose 80/tcp`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h := image.HostImage{Refs: args, Busybox: busybox, Config: v1.Config{
				Entrypoint: entrypoint, Cmd: command, Env: env, User: user, WorkingDir: workdir,
			}}
			for _, f := range files {
				hf, err := image.ParseHostFile(f)
				if err != nil {
					return fmt.Errorf("--file %w", err)
				}
				h.Files = append(h.Files, hf)
			}
			for _, p := range expose {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				if h.Config.ExposedPorts == nil {
					h.Config.ExposedPorts = map[string]struct{}{}
				}
				h.Config.ExposedPorts[p] = struct{}{}
			}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return fmt.Errorf("--label %q: want KEY=VALUE", l)
				}
				if h.Config.Labels == nil {
					h.Config.Labels = map[string]string{}
				}
				h.Config.Labels[k] = v
			}
			addr, err := runningRegistry(dataDir)
			if err != nil {
				return err
			}
			dir := imagesDir(dataDir)
			refs, err := image.BuildHost(cmd.Context(), addr, image.LayoutDir(dir), image.CacheDir(dir), h)
			if err != nil {
				return registryError(err, dataDir)
			}
			for _, ref := range refs {
				fmt.Fprintf(cmd.OutOrStdout(), "built %s\n", ref)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir, "kubelab's data directory (the registry's state is in DATA-DIR/images)")
	f.StringArrayVar(&files, "file", nil, "SRC[:DEST]: a host file or directory to put at DEST in the image (repeatable)")
	f.BoolVar(&busybox, "busybox", false, "add busybox-static as /bin/busybox with its applets")
	f.StringSliceVar(&entrypoint, "entrypoint", nil, "the image's Entrypoint (comma-separated)")
	f.StringSliceVar(&command, "cmd", nil, "the image's Cmd (comma-separated)")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE in the image's Env (repeatable); PATH defaults to the usual one")
	f.StringVar(&user, "user", "", "the image's User")
	f.StringVar(&workdir, "workdir", "", "the image's WorkingDir")
	f.StringArrayVar(&expose, "expose", nil, "PORT[/PROTO] the image exposes (repeatable)")
	f.StringArrayVar(&labels, "label", nil, "KEY=VALUE label of the image (repeatable)")
	return cmd
}

func newImageTagCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "tag SOURCE TARGET [TARGET...]",
		Short: "Serve an image of the running kubelab under more names",
		Long: `Serve the image kubelab's registry serves as SOURCE under each TARGET too (kept in
DATA-DIR/images/layout, served again after a restart), as ` + "`docker tag`" + ` does.`,
		Example: "  kubelab image tag registry.k8s.io/pause:3.10 registry.k8s.io/pause:3.10.2",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := runningRegistry(dataDir)
			if err != nil {
				return err
			}
			refs, err := image.Tag(cmd.Context(), addr, image.LayoutDir(imagesDir(dataDir)), args[0], args[1:])
			if err != nil {
				return registryError(err, dataDir)
			}
			for _, ref := range refs {
				fmt.Fprintf(cmd.OutOrStdout(), "tagged %s\n", ref)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir, "kubelab's data directory (the registry's state is in DATA-DIR/images)")
	return cmd
}
