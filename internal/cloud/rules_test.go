package cloud

import (
	"testing"
)

func TestResolveSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   volumeSpec
		want volumeSpec
		code string
	}{
		{"gp3 defaults", volumeSpec{Size: 10}, volumeSpec{Type: "gp3", Size: 10, Iops: 3000, Throughput: 125}, ""},
		{"gp2 iops from size", volumeSpec{Type: "gp2", Size: 100}, volumeSpec{Type: "gp2", Size: 100, Iops: 300}, ""},
		{"gp2 iops floor", volumeSpec{Type: "gp2", Size: 1}, volumeSpec{Type: "gp2", Size: 1, Iops: 100}, ""},
		{"gp2 iops ceiling", volumeSpec{Type: "gp2", Size: 16000}, volumeSpec{Type: "gp2", Size: 16000, Iops: 16000}, ""},
		{"gp2 refuses iops", volumeSpec{Type: "gp2", Size: 10, Iops: 500}, volumeSpec{}, "InvalidParameterCombination"},
		{"gp3 iops per GiB", volumeSpec{Type: "gp3", Size: 8, Iops: 5000}, volumeSpec{}, "InvalidParameterValue"},
		{"gp3 iops ok", volumeSpec{Type: "gp3", Size: 10, Iops: 5000, Throughput: 500}, volumeSpec{Type: "gp3", Size: 10, Iops: 5000, Throughput: 500}, ""},
		{"gp3 throughput per iops", volumeSpec{Type: "gp3", Size: 10, Throughput: 1000}, volumeSpec{}, "InvalidParameterValue"},
		{"gp3 too big", volumeSpec{Type: "gp3", Size: 70000}, volumeSpec{}, "InvalidParameterValue"},
		{"io1 needs iops", volumeSpec{Type: "io1", Size: 10}, volumeSpec{}, "MissingParameter"},
		{"io1 ratio", volumeSpec{Type: "io1", Size: 10, Iops: 1000}, volumeSpec{}, "InvalidParameterValue"},
		{"io1 ok", volumeSpec{Type: "io1", Size: 10, Iops: 500}, volumeSpec{Type: "io1", Size: 10, Iops: 500}, ""},
		{"io2 multi-attach", volumeSpec{Type: "io2", Size: 10, Iops: 10000, MultiAttach: true}, volumeSpec{Type: "io2", Size: 10, Iops: 10000, MultiAttach: true}, ""},
		{"io2 too small", volumeSpec{Type: "io2", Size: 2, Iops: 100}, volumeSpec{}, "InvalidParameterValue"},
		{"gp3 no multi-attach", volumeSpec{Type: "gp3", Size: 10, MultiAttach: true}, volumeSpec{}, "InvalidParameterCombination"},
		{"st1 minimum", volumeSpec{Type: "st1", Size: 100}, volumeSpec{}, "InvalidParameterValue"},
		{"sc1", volumeSpec{Type: "sc1", Size: 125}, volumeSpec{Type: "sc1", Size: 125}, ""},
		{"standard maximum", volumeSpec{Type: "standard", Size: 2000}, volumeSpec{}, "InvalidParameterValue"},
		{"unknown type", volumeSpec{Type: "gp9", Size: 1}, volumeSpec{}, "InvalidParameterValue"},
		{"st1 refuses throughput", volumeSpec{Type: "st1", Size: 500, Throughput: 200}, volumeSpec{}, "InvalidParameterCombination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveSpec(tc.in)
			if tc.code != "" {
				if err == nil || err.Code != tc.code {
					t.Fatalf("got %+v, %v; want %s", got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCheckAttach(t *testing.T) {
	running := &Instance{ID: "i-1", Zone: "z1", State: "running", AttachLimit: 2}
	avail := func() *Volume { return &Volume{ID: "vol-1", Zone: "z1", State: "available"} }
	for _, tc := range []struct {
		name   string
		vol    *Volume
		inst   *Instance
		device string
		count  int
		used   map[string]string
		code   string
	}{
		{"ok", avail(), running, "/dev/xvdba", 0, nil, ""},
		{"other zone", avail(), &Instance{ID: "i-1", Zone: "z2", State: "running", AttachLimit: 2}, "/dev/xvdba", 0, nil, "InvalidVolume.ZoneMismatch"},
		{"instance stopped", avail(), &Instance{ID: "i-1", Zone: "z1", State: "terminated", AttachLimit: 2}, "/dev/xvdba", 0, nil, "IncorrectInstanceState"},
		{"creating", &Volume{ID: "vol-1", Zone: "z1", State: "creating"}, running, "/dev/xvdba", 0, nil, "IncorrectState"},
		{"attached elsewhere", &Volume{ID: "vol-1", Zone: "z1", State: "in-use", Attachments: []Attachment{{InstanceID: "i-2"}}}, running, "/dev/xvdba", 0, nil, "VolumeInUse"},
		{"multi-attach", &Volume{ID: "vol-1", Zone: "z1", State: "in-use", MultiAttach: true, Attachments: []Attachment{{InstanceID: "i-2"}}}, running, "/dev/xvdba", 0, nil, ""},
		{"already here", &Volume{ID: "vol-1", Zone: "z1", State: "in-use", MultiAttach: true, Attachments: []Attachment{{InstanceID: "i-1"}}}, running, "/dev/xvdba", 0, nil, "VolumeInUse"},
		{"device taken", avail(), running, "/dev/xvdba", 1, map[string]string{"/dev/xvdba": "vol-9"}, "InvalidParameterValue"},
		{"limit", avail(), running, "/dev/xvdbc", 2, map[string]string{"/dev/xvdba": "vol-8", "/dev/xvdbb": "vol-9"}, "AttachmentLimitExceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAttach(tc.vol, tc.inst, tc.device, tc.count, tc.used)
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.code != "" && (err == nil || err.Code != tc.code):
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}

func TestCheckDevice(t *testing.T) {
	for dev, ok := range map[string]bool{"/dev/xvdba": true, "/dev/xvdf": true, "/dev/sdf": true, "/dev/xvda": false, "/dev/sda": false,
		"xvdba": false, "/dev/xvdba1": false, "/dev/nvme1n1": false, "": false} {
		if got := checkDevice(dev) == nil; got != ok {
			t.Errorf("checkDevice(%q) ok=%v, want %v", dev, got, ok)
		}
	}
}

func TestCheckModify(t *testing.T) {
	gp2 := &Volume{ID: "vol-1", Type: "gp2", SizeGiB: 10, Iops: 100, State: "in-use"}
	gp3 := &Volume{ID: "vol-1", Type: "gp3", SizeGiB: 10, Iops: 3000, Throughput: 125, State: "available"}
	for _, tc := range []struct {
		name       string
		vol        *Volume
		in         volumeSpec
		inProgress bool
		want       volumeSpec
		code       string
	}{
		{"grow gp2", gp2, volumeSpec{Size: 20}, false, volumeSpec{Type: "gp2", Size: 20, Iops: 100}, ""},
		{"gp2 to gp3", gp2, volumeSpec{Type: "gp3"}, false, volumeSpec{Type: "gp3", Size: 10, Iops: 3000, Throughput: 125}, ""},
		{"gp3 iops kept on grow", &Volume{ID: "vol-1", Type: "gp3", SizeGiB: 10, Iops: 4000, Throughput: 250, State: "available"}, volumeSpec{Size: 20}, false, volumeSpec{Type: "gp3", Size: 20, Iops: 4000, Throughput: 250}, ""},
		{"shrink", gp3, volumeSpec{Size: 5}, false, volumeSpec{}, "InvalidParameterValue"},
		{"nothing", gp3, volumeSpec{Size: 10}, false, volumeSpec{}, "InvalidParameterValue"},
		{"in progress", gp3, volumeSpec{Size: 20}, true, volumeSpec{}, "IncorrectModificationState"},
		{"creating", &Volume{ID: "vol-1", Type: "gp3", SizeGiB: 10, State: "creating"}, volumeSpec{Size: 20}, false, volumeSpec{}, "IncorrectState"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkModify(tc.vol, tc.in, tc.inProgress)
			if tc.code != "" {
				if err == nil || err.Code != tc.code {
					t.Fatalf("got %+v, %v; want %s", got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestPaginate(t *testing.T) {
	ids := []string{"c", "a", "e", "b", "d"}
	var all []string
	token := ""
	for pages := 0; ; pages++ {
		page, next, err := paginate(append([]string(nil), ids...), 2, token)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		token = next
	}
	if len(all) != 5 || all[0] != "a" || all[4] != "e" {
		t.Errorf("pages gave %v", all)
	}
	if _, _, err := paginate(ids, 2, "%%%"); err == nil {
		t.Error("bad token accepted")
	}
}

func TestWildcardAndZoneID(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"pvc-*", "pvc-123", true}, {"pvc-?", "pvc-12", false}, {"/dev/xvd*", "/dev/xvdba", true}, {"a.b", "axb", false}, {"x", "x", true},
	} {
		if got := wildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
	if got := zoneID("us-east-1", 0); got != "use1-az1" {
		t.Errorf("zoneID = %s", got)
	}
	if got := zoneID("eu-west-2", 2); got != "euw2-az3" {
		t.Errorf("zoneID = %s", got)
	}
	if attachLimit("m5.large") != 26 || attachLimit("t2.micro") != 39 {
		t.Error("attach limits")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{DataDir: "/tmp/x"}, true},
		{"relative dir", Config{DataDir: "x"}, false},
		{"no dir", Config{}, false},
		{"public listen", Config{DataDir: "/tmp/x", Listen: "0.0.0.0:80"}, false},
		{"zone of another region", Config{DataDir: "/tmp/x", Zones: []string{"eu-west-1a"}}, false},
		{"bad profile", Config{DataDir: "/tmp/x", Profile: "slow"}, false},
	} {
		cfg := tc.cfg.withDefaults()
		if err := cfg.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate() = %v", tc.name, err)
		}
	}
}
