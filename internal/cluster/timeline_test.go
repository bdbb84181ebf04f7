package cluster_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelab/kubelab/internal/testutil"
)

// timeline records, from the API server's watch, every state each PVC, PV and
// VolumeAttachment passed through, in order: what a user sees with `kubectl get -w`.
type timeline struct {
	mu     sync.Mutex
	states map[string][]string // "pvc/<ns>/<name>", "pv/<name>", "va/<name>" → states
}

// pvcState is a claim's phase, with "+node" once a node is selected and "+volume" once
// it names its volume.
func pvcState(c *corev1.PersistentVolumeClaim) string {
	s := string(c.Status.Phase)
	if _, ok := c.Annotations[annSelectedNode]; ok {
		s += "+node"
	}
	if c.Spec.VolumeName != "" {
		s += "+volume"
	}
	return s
}

func vaState(va *storagev1.VolumeAttachment) string {
	return "attached=" + strconv.FormatBool(va.Status.Attached)
}

func startTimeline(t testing.TB, client kubernetes.Interface) *timeline {
	tl := &timeline{states: map[string][]string{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	record := func(key, state string) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if s := tl.states[key]; len(s) == 0 || s[len(s)-1] != state {
			tl.states[key] = append(s, state)
		}
	}
	on := func(f func(obj any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) },
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				switch x := o.(type) {
				case *corev1.PersistentVolumeClaim:
					record("pvc/"+x.Namespace+"/"+x.Name, "deleted")
				case *corev1.PersistentVolume:
					record("pv/"+x.Name, "deleted")
				case *storagev1.VolumeAttachment:
					record("va/"+x.Name, "deleted")
				}
			}}
	}
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandlerFuncs{
		factory.Core().V1().PersistentVolumeClaims().Informer(): on(func(o any) {
			c := o.(*corev1.PersistentVolumeClaim)
			record("pvc/"+c.Namespace+"/"+c.Name, pvcState(c))
		}),
		factory.Core().V1().PersistentVolumes().Informer(): on(func(o any) {
			pv := o.(*corev1.PersistentVolume)
			record("pv/"+pv.Name, string(pv.Status.Phase))
		}),
		factory.Storage().V1().VolumeAttachments().Informer(): on(func(o any) {
			va := o.(*storagev1.VolumeAttachment)
			record("va/"+va.Name, vaState(va))
		}),
	}
	for inf, h := range handlers {
		if _, err := inf.AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return tl
}

func (tl *timeline) of(key string) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.states[key]...)
}

// expectOrder checks that key went through want in this order, starting with want[0]
// (other states may lie between them). A PV starts Pending, as the API server creates it.
// The watch may lag what a GET showed: the check waits for the last states.
func (tl *timeline) expectOrder(t testing.TB, key string, want ...string) {
	t.Helper()
	testutil.Eventually(t, key+" through "+strings.Join(want, ", "), func() error {
		if got := tl.of(key); !inOrder(got, want) {
			return fmt.Errorf("%s went through %v, want %v in this order, starting with %s", key, got, want, want[0])
		}
		return nil
	})
}

// inOrder tells whether got starts with want[0] and holds want as a subsequence.
func inOrder(got, want []string) bool {
	if len(got) == 0 || got[0] != want[0] {
		return false
	}
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return fmt.Sprint(tl.states)
}
