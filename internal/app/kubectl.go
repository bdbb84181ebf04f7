package app

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
)

// newKubectlCommand embeds kubectl. It talks to the kubelab cluster of the default data
// dir (DefaultDataDir) unless KUBECONFIG or --kubeconfig says otherwise.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl [kubectl arguments]",
		Short:              "Run kubectl against the kubelab cluster",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithDiscoveryBurst(300).WithDiscoveryQPS(50)
			if os.Getenv("KUBECONFIG") == "" && !hasKubeconfigFlag(args) {
				path := filepath.Join(DefaultDataDir, "kubeconfig")
				flags.KubeConfig = &path
			}
			kubectl := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
				PluginHandler: kubectlcmd.NewDefaultPluginHandler(nil),
				Arguments:     append([]string{"kubectl"}, args...),
				ConfigFlags:   flags,
				IOStreams:     genericiooptions.IOStreams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()},
			})
			kubectl.SetArgs(args)
			return kubectl.ExecuteContext(cmd.Context())
		},
	}
}

func hasKubeconfigFlag(args []string) bool {
	for _, a := range args {
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			return true
		}
	}
	return false
}
