package rootcacertpublisher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func TestDesired(t *testing.T) {
	want, changed := desired(nil, "team", []byte(testCA))
	if !changed || want.Name != ConfigMapName || want.Namespace != "team" || want.Data[DataKey] != testCA ||
		want.Annotations[DescriptionAnnotation] != Description || len(want.Data) != 1 {
		t.Errorf("for no ConfigMap: %v %+v", changed, want)
	}
	if _, changed := desired(want, "team", []byte(testCA)); changed {
		t.Error("the desired ConfigMap is changed again")
	}

	edited := want.DeepCopy()
	edited.Data = map[string]string{DataKey: "forged", "extra": "x"}
	edited.Labels = map[string]string{"keep": "me"}
	edited.Annotations = map[string]string{"note": "kept"}
	edited.BinaryData = map[string][]byte{"bin": {1}}
	fixed, changed := desired(edited, "team", []byte(testCA))
	if !changed || len(fixed.Data) != 1 || fixed.Data[DataKey] != testCA || fixed.Labels["keep"] != "me" ||
		fixed.Annotations["note"] != "kept" || fixed.Annotations[DescriptionAnnotation] != Description || len(fixed.BinaryData) != 1 {
		t.Errorf("an edited ConfigMap: %v %+v", changed, fixed)
	}
	if edited.Data[DataKey] != "forged" {
		t.Error("desired modified its input")
	}
}

func TestConfigIsChecked(t *testing.T) {
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Error("a controller without a CA bundle")
	}
}

func TestConfigMapInEveryNamespace(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ca, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	controllertest.RunController(t, s.Client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{RootCA: ca}, s.Client, f)
	})

	cms := func(ns string) (*corev1.ConfigMap, error) {
		return s.Client.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName, metav1.GetOptions{})
	}
	published := func(ns string) func() error {
		return func() error {
			cm, err := cms(ns)
			if err != nil {
				return err
			}
			if cm.Data[DataKey] != string(ca) || len(cm.Data) != 1 || cm.Annotations[DescriptionAnnotation] != Description {
				return fmt.Errorf("%s/%s holds %v %v", ns, ConfigMapName, cm.Data, cm.Annotations)
			}
			return nil
		}
	}
	ns := fmt.Sprintf("team-%d", time.Now().UnixNano()%100000)
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"default", "kube-system", ns} {
		testutil.EventuallyWithin(t, 30*time.Second, "the CA bundle in "+n, published(n))
	}

	// Edited: put back.
	cm, err := cms(ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{DataKey: "not the CA", "extra": "x"}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "the edited bundle put back", published(ns))

	// Deleted: made again.
	if err := s.Client.CoreV1().ConfigMaps(ns).Delete(ctx, ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "the deleted bundle made again", published(ns))
}
