package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	cmd.AddCommand(newImageImportCommand())
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
			addr, err := image.RecordedAddr(dir)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("no kubelab image registry has run with data dir %s (no %s): start `kubelab up` first", dataDir, image.AddrFile(dir))
				}
				return err
			}
			refs, err := image.Import(cmd.Context(), addr, image.LayoutDir(dir), args[0])
			if errors.Is(err, image.ErrNoRegistry) {
				return fmt.Errorf("%w (the address recorded in %s): is `kubelab up` running with data dir %s?", err, image.AddrFile(dir), dataDir)
			}
			if err != nil {
				return err
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
