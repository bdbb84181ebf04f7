package cloudprovider

import "testing"

func TestParseProviderID(t *testing.T) {
	for in, want := range map[string]string{
		"aws:///us-east-1a/i-0123": "i-0123",
		"aws:///i-0abc":            "i-0abc",
		"gce://p/z/n":              "",
		"aws:///us-east-1a/":       "",
		"aws:///a/b/i-1":           "",
	} {
		got, err := ParseProviderID(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ParseProviderID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if Region("us-east-1c") != "us-east-1" || ProviderID("us-east-1c", "i-1") != "aws:///us-east-1c/i-1" {
		t.Error("Region or ProviderID")
	}
}
