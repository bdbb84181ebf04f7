// Package version holds kubelab's version and the Kubernetes version it speaks.
package version

import (
	"fmt"
	"runtime"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Kubelab is the version of kubelab itself; set with -ldflags at release time.
var Kubelab = "v0.1.0-dev"

// Kubernetes API level kubelab serves; it follows the k8s.io modules it is built on.
const (
	Major = "1"
	Minor = "37"
)

// Info is what the API server answers on /version.
func Info() apimachineryversion.Info {
	return apimachineryversion.Info{
		Major:      Major,
		Minor:      Minor,
		GitVersion: fmt.Sprintf("v%s.%s.2-kubelab", Major, Minor),
		GitCommit:  Kubelab,
		BuildDate:  "1970-01-01T00:00:00Z",
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}
