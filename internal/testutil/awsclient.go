package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

var (
	awsClientOnce sync.Once
	awsClientPath string
	awsClientErr  error
)

// AWSClient builds the test program testdata/awsclient (static, so that an image of that
// one file runs it), once per test process, and returns its path. The program takes its
// credentials from the AWS SDK's default chain, calls sts:GetCallerIdentity and
// ec2:DescribeVolumes (ec2:CreateVolume with -create-volume) and prints the outcome as
// JSON: the test image of IAM Roles for Service Accounts. As Commands' directory, the
// program's is named after the process and removed by a later one.
func AWSClient(t testing.TB) string {
	t.Helper()
	awsClientOnce.Do(func() {
		parent := filepath.Join(os.TempDir(), "kubelab-test-awsclient")
		if awsClientErr = os.MkdirAll(parent, 0o755); awsClientErr != nil {
			return
		}
		removeEnded(parent)
		awsClientPath = filepath.Join(parent, strconv.Itoa(os.Getpid()), "awsclient")
		cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", awsClientPath, "./internal/testutil/testdata/awsclient")
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			awsClientErr = fmt.Errorf("go build awsclient: %w\n%s", err, out)
		}
	})
	if awsClientErr != nil {
		t.Fatalf("build the awsclient test program: %v", awsClientErr)
	}
	return awsClientPath
}
