package cloud

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// awsCLI finds the aws CLI: Debian's awscli at /usr/bin/aws first, then PATH.
func awsCLI(t *testing.T) string {
	if _, err := os.Stat("/usr/bin/aws"); err == nil {
		return "/usr/bin/aws"
	}
	p, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("the aws CLI is not installed (Debian package awscli); hack/setup.sh --test installs it")
	}
	return p
}

// TestAWSCLI drives the cloud with the aws CLI, configured only by the files the cloud
// wrote and its endpoint.
func TestAWSCLI(t *testing.T) {
	cli := awsCLI(t)
	r := startCloud(t, Config{Hollow: true})
	inst := r.runInstance(t, "us-east-1a")
	vol := r.createVolume(t, "us-east-1a", 2)
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"ec2", "--endpoint-url", r.Endpoint(), "--output", "json"}, args...)...)
		cmd.Env = []string{"AWS_CONFIG_FILE=" + r.ConfigFile(), "AWS_SHARED_CREDENTIALS_FILE=" + r.CredentialsFile(), "AWS_PAGER=", "HOME=" + t.TempDir()}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		return m
	}
	att := run("attach-volume", "--volume-id", vol, "--instance-id", inst, "--device", "/dev/xvdba")
	if att["State"] != "attaching" || att["VolumeId"] != vol {
		t.Errorf("attach-volume answered %v", att)
	}
	out := run("describe-volumes", "--filters", "Name=attachment.instance-id,Values="+inst)
	vols, _ := out["Volumes"].([]any)
	if len(vols) != 1 {
		t.Fatalf("describe-volumes: %v", out)
	}
	v := vols[0].(map[string]any)
	atts := v["Attachments"].([]any)
	if v["VolumeId"] != vol || v["State"] != "in-use" || len(atts) != 1 || atts[0].(map[string]any)["State"] != "attached" {
		t.Errorf("describe-volumes: %v", v)
	}
	// The instance's interfaces and every address on them.
	created := run("create-network-interface", "--subnet-id", r.subnetOfZone("us-east-1a").ID, "--secondary-private-ip-address-count", "2")
	eni, _ := created["NetworkInterface"].(map[string]any)
	if eni == nil {
		t.Fatalf("create-network-interface: %v", created)
	}
	run("attach-network-interface", "--network-interface-id", eni["NetworkInterfaceId"].(string), "--instance-id", inst, "--device-index", "1")
	out = run("describe-network-interfaces", "--filters", "Name=attachment.instance-id,Values="+inst)
	enis, _ := out["NetworkInterfaces"].([]any)
	ips := 0
	for _, e := range enis {
		ips += len(e.(map[string]any)["PrivateIpAddresses"].([]any))
	}
	if len(enis) != 2 || ips != 4 {
		t.Errorf("describe-network-interfaces: %d interfaces, %d addresses, want 2 and 4: %v", len(enis), ips, out)
	}
}
