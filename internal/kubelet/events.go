package kubelet

import (
	"fmt"
	"hash/fnv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// SharedEvents are the event broadcasters the kubelets of a process (kubelab's hollow
// nodes) share, in place of one each: a broadcaster holds two queues of a thousand events
// and two goroutines, which thousands of nodes would multiply. A node's kubelet records
// through a recorder of its own (source: kubelet on its node) on one of eventShards
// broadcasters, each writing one event at a time, and each event is written with the
// client of the kubelet whose node is its source, so the API server sees the same
// requests, from the same users, as from kubelets with a broadcaster each.
type SharedEvents struct {
	shards [eventShards]record.EventBroadcaster
	once   sync.Once
	mu     sync.RWMutex
	sinks  map[string]record.EventSink // by node name
}

// eventShards is how many broadcasters the kubelets share: how many events are written
// at once.
const eventShards = 32

// NewSharedEvents returns the broadcasters; they write once the first kubelet runs and
// until Shutdown.
func NewSharedEvents() *SharedEvents {
	s := &SharedEvents{sinks: map[string]record.EventSink{}}
	for i := range s.shards {
		s.shards[i] = record.NewBroadcaster()
	}
	return s
}

// Shutdown stops writing events.
func (s *SharedEvents) Shutdown() {
	for _, b := range s.shards {
		b.Shutdown()
	}
}

// recorder is node's recorder, on the broadcaster of node's shard.
func (s *SharedEvents) recorder(node string) record.EventRecorder {
	return s.shards[eventShard(node)].NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node})
}

// eventShard is the broadcaster of node's events.
func eventShard(node string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return int(h.Sum32() % eventShards)
}

// start makes node's events be written with client, and the broadcasters write.
func (s *SharedEvents) start(node string, client kubernetes.Interface) {
	s.mu.Lock()
	s.sinks[node] = &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	s.mu.Unlock()
	s.once.Do(func() {
		for _, b := range s.shards {
			b.StartRecordingToSink(nodeSinks{s})
		}
	})
}

// stop forgets node's client: its events are dropped from now on.
func (s *SharedEvents) stop(node string) {
	s.mu.Lock()
	delete(s.sinks, node)
	s.mu.Unlock()
}

// nodeSinks writes each event through the sink of its source node.
type nodeSinks struct{ s *SharedEvents }

func (n nodeSinks) sink(e *corev1.Event) (record.EventSink, error) {
	n.s.mu.RLock()
	defer n.s.mu.RUnlock()
	if sink, ok := n.s.sinks[e.Source.Host]; ok {
		return sink, nil
	}
	// A request that cannot be made is dropped, not retried (the broadcaster's
	// writer would sleep on it, holding up the shard's other nodes).
	return nil, &rest.RequestConstructionError{Err: fmt.Errorf("event %s/%s: node %q runs no kubelet of this process", e.Namespace, e.Name, e.Source.Host)}
}

func (n nodeSinks) Create(e *corev1.Event) (*corev1.Event, error) {
	sink, err := n.sink(e)
	if err != nil {
		return nil, err
	}
	return sink.Create(e)
}

func (n nodeSinks) Update(e *corev1.Event) (*corev1.Event, error) {
	sink, err := n.sink(e)
	if err != nil {
		return nil, err
	}
	return sink.Update(e)
}

func (n nodeSinks) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	sink, err := n.sink(e)
	if err != nil {
		return nil, err
	}
	return sink.Patch(e, data)
}
