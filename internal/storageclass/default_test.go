package storageclass

import (
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefault(t *testing.T) {
	at := func(name string, created time.Time, ann map[string]string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann, CreationTimestamp: metav1.NewTime(created)}}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	def := map[string]string{AnnDefault: "true"}
	beta := map[string]string{AnnBetaDefault: "true"}
	for _, tc := range []struct {
		name    string
		classes []*storagev1.StorageClass
		want    string
	}{
		{"no classes", nil, ""},
		{"none marked", []*storagev1.StorageClass{at("gp2", t0, nil), at("io1", t0, map[string]string{AnnDefault: "false"})}, ""},
		{"one marked", []*storagev1.StorageClass{at("io1", t0, nil), at("gp2", t0, def)}, "gp2"},
		{"the beta annotation", []*storagev1.StorageClass{at("gp2", t0, beta)}, "gp2"},
		{"several: the newest", []*storagev1.StorageClass{at("gp2", t0, def), at("gp3", t0.Add(time.Hour), def), at("io2", t0.Add(time.Minute), beta)}, "gp3"},
		{"as new: the first by name", []*storagev1.StorageClass{at("gp3", t0, def), at("gp2", t0, def)}, "gp2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if c := Default(tc.classes); c != nil {
				got = c.Name
			}
			if got != tc.want {
				t.Errorf("default class %q, want %q", got, tc.want)
			}
		})
	}
}
