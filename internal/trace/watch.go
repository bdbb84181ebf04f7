package trace

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Watch follows target while it happens, until ctx ends: it records every state the
// namespace's pods and claims, and the volumes and attachments, pass through, with the
// moment it saw each (sub-second, unlike the API's timestamps), and after each change
// calls emit with the trace rebuilt. It returns the last snapshot, taken after ctx ended.
func Watch(ctx context.Context, src Sources, target Target, emit func(Trace)) (*Snapshot, error) {
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	w := &watcher{now: now, changed: make(chan struct{}, 1)}
	factory := informers.NewSharedInformerFactoryWithOptions(src.Client, 0)
	nsFactory := informers.NewSharedInformerFactoryWithOptions(src.Client, 0, informers.WithNamespace(target.Namespace))
	handlers := []struct {
		inf   cache.SharedIndexInformer
		state func(obj any) (kind, name, state string)
	}{
		{nsFactory.Core().V1().Pods().Informer(), func(obj any) (string, string, string) {
			p := obj.(*corev1.Pod)
			if target.Kind == "pod" && p.Name == target.Name {
				w.claimsOf(p)
			}
			return "pod", p.Name, podState(p)
		}},
		{nsFactory.Core().V1().PersistentVolumeClaims().Informer(), func(obj any) (string, string, string) {
			c := obj.(*corev1.PersistentVolumeClaim)
			return "pvc", c.Name, string(c.Status.Phase)
		}},
		{factory.Core().V1().PersistentVolumes().Informer(), func(obj any) (string, string, string) {
			pv := obj.(*corev1.PersistentVolume)
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == target.Namespace {
				w.record("pv", pv.Name, "claim="+claimOfVolume(pv))
			}
			return "pv", pv.Name, string(pv.Status.Phase)
		}},
		{factory.Storage().V1().VolumeAttachments().Informer(), func(obj any) (string, string, string) {
			va := obj.(*storagev1.VolumeAttachment)
			return "va", va.Name, "attached=" + strconv.FormatBool(va.Status.Attached)
		}},
		{nsFactory.Core().V1().Events().Informer(), nil},
	}
	for _, h := range handlers {
		state := h.state
		_, err := h.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { w.seen(state, obj, initial, false) },
			UpdateFunc: func(_, obj any) { w.seen(state, obj, false, false) },
			DeleteFunc: func(obj any) { w.seen(state, obj, false, true) },
		})
		if err != nil {
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	nsFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nsFactory.Shutdown()
	var prev *Snapshot
	snapshot := func(ctx context.Context) (*Snapshot, error) {
		t := target
		t.Claims = w.knownClaims()
		s, err := Collect(ctx, src, t)
		if err != nil {
			return nil, err
		}
		s.Observed = w.observations()
		if s.Pod == nil && target.Kind == "pod" {
			s.Name = target.Name
		}
		keepGone(s, prev)
		prev = s
		return s, nil
	}
	select { // a first trace at once
	case w.changed <- struct{}{}:
	default:
	}
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			return snapshot(final)
		case <-w.changed:
		}
		s, err := snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return nil, err
		}
		emit(Build(s))
	}
}

// watcher records the states it sees.
type watcher struct {
	now     func() time.Time
	changed chan struct{}

	mu     sync.Mutex
	obs    []Observation
	claims []string // the traced pod's claims, as last seen
}

// claimsOf remembers the claims the traced pod uses, for when it is gone.
func (w *watcher) claimsOf(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims = podClaims(p)
}

func (w *watcher) knownClaims() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.claims)
}

// seen records obj's state (state nil: only a change to report). The states of the
// first list are not changes seen as they happened: they are not recorded.
func (w *watcher) seen(state func(obj any) (kind, name, s string), obj any, initial, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if state != nil {
		kind, name, s := state(obj)
		if initial {
			return
		}
		if deleted {
			s = "deleted"
		}
		w.record(kind, name, s)
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// record adds an observation unless it is the object's last one already.
func (w *watcher) record(kind, name, state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	isClaim := strings.HasPrefix(state, "claim=")
	for i := len(w.obs) - 1; i >= 0; i-- {
		if o := w.obs[i]; o.Kind == kind && o.Name == name && strings.HasPrefix(o.State, "claim=") == isClaim {
			if o.State == state {
				return
			}
			break
		}
	}
	w.obs = append(w.obs, Observation{Kind: kind, Name: name, State: state, At: w.now()})
}

func (w *watcher) observations() []Observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Observation(nil), w.obs...)
}

// podState is the pod's phase, with "+ready" once it is Ready.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if podReady(p) {
		s += "+ready"
	}
	return s
}

// keepGone keeps in s the pod, claims, volumes and attachments that prev had and that are
// gone since: the trace of a flow watched to its end still shows its beginning.
func keepGone(s, prev *Snapshot) {
	if prev == nil {
		return
	}
	if s.Pod == nil && prev.Pod != nil && prev.Pod.Name == s.Name {
		s.Pod = prev.Pod
		s.Node = prev.Node
	}
	for _, c := range prev.Claims {
		if !slices.ContainsFunc(s.Claims, func(x *corev1.PersistentVolumeClaim) bool { return x.Name == c.Name }) {
			s.Claims = append(s.Claims, c)
			s.MissingClaims = slices.DeleteFunc(s.MissingClaims, func(n string) bool { return n == c.Name })
		}
	}
	for _, v := range prev.Volumes {
		if !slices.ContainsFunc(s.Volumes, func(x *corev1.PersistentVolume) bool { return x.Name == v.Name }) {
			s.Volumes = append(s.Volumes, v)
		}
	}
	for _, va := range prev.Attachments {
		if !slices.ContainsFunc(s.Attachments, func(x *storagev1.VolumeAttachment) bool { return x.Name == va.Name }) {
			s.Attachments = append(s.Attachments, va)
		}
	}
	for _, cv := range prev.Cloud {
		i := slices.IndexFunc(s.Cloud, func(x CloudVolume) bool { return x.ID == cv.ID })
		switch {
		case i < 0:
			s.Cloud = append(s.Cloud, cv)
		case len(s.Cloud[i].Attachments) == 0: // detached since: the attachment was
			s.Cloud[i].Attachments = cv.Attachments
		}
	}
	if len(s.Logs) < len(prev.Logs) {
		s.Logs = prev.Logs
	}
}
