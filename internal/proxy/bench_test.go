package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
)

// benchCluster is n Services of 10 endpoints each, as the informers would hold them.
type benchCluster struct {
	services []*v1.Service
	slices   map[types.NamespacedName][]*discovery.EndpointSlice
}

func newBenchCluster(n int) *benchCluster {
	c := &benchCluster{slices: map[types.NamespacedName][]*discovery.EndpointSlice{}}
	for i := range n {
		svc := makeService(fmt.Sprintf("ns%d", i%50), fmt.Sprintf("svc%d", i),
			fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256), nodePort(int32(30000+i%2768)))
		if i >= 2768 {
			svc.Spec.Type = v1.ServiceTypeClusterIP
			svc.Spec.Ports[0].NodePort = 0
		}
		var eps []ep
		for j := range 10 {
			k := i*10 + j
			eps = append(eps, ep{ip: fmt.Sprintf("10.244.%d.%d", k/250, 2+k%250), node: fmt.Sprintf("node-%d", j%3)})
		}
		c.services = append(c.services, svc)
		c.slices[nn(svc)] = []*discovery.EndpointSlice{makeSlice(svc, svc.Name+"-1", 8080, eps...)}
	}
	return c
}

func (c *benchCluster) desired() map[types.NamespacedName]*ServiceState {
	out := make(map[types.NamespacedName]*ServiceState, len(c.services))
	for _, svc := range c.services {
		out[nn(svc)] = ComputeServiceState(svc, c.slices[nn(svc)], testParams)
	}
	return out
}

// benchSyncer is a syncer on real nft in a namespace of the benchmark's own.
func benchSyncer(b *testing.B) *syncer {
	b.Helper()
	testutil.RequireRoot(b, "nft")
	netns, err := testutils.NewNS()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	nft, err := newNFTables(netns.Path(), DefaultTable)
	if err != nil {
		b.Fatal(err)
	}
	s := newSyncer(nft, []string{"172.31.0.5"}, testCluster, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.joinElements = true
	return s
}

// BenchmarkSync measures, for 1,000 and 10,000 Services of 10 endpoints each (one
// namespace and one first sync per size):
//   - full-empty-table: the first full sync, into a table that does not exist yet;
//   - full-resync: a full sync of a table that already holds the same content;
//   - endpoint-change: the sync after one endpoint of one Service changes readiness.
//
// Each includes computing the states and the transaction through nft. The 10,000 case
// takes minutes.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			c := newBenchCluster(n)
			s := benchSyncer(b)
			ctx := context.Background()
			if _, err := s.fullSync(ctx, c.desired()); err != nil {
				b.Fatal(err)
			}

			b.Run("full-empty-table", func(b *testing.B) {
				var stats syncStats
				for b.Loop() {
					b.StopTimer()
					tx := s.nft.NewTransaction()
					tx.Delete(&knftables.Table{})
					if err := s.nft.Run(ctx, tx); err != nil {
						b.Fatal(err)
					}
					s = newSyncer(s.nft, s.nodeIPs, s.clusterCIDR, s.log)
					s.joinElements = true
					b.StartTimer()
					var err error
					if stats, err = s.fullSync(ctx, c.desired()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(stats.operations), "ops/tx")
			})

			b.Run("full-resync", func(b *testing.B) {
				var stats syncStats
				for b.Loop() {
					var err error
					if stats, err = s.fullSync(ctx, c.desired()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(stats.operations), "ops/tx")
			})

			b.Run("endpoint-change", func(b *testing.B) {
				var stats syncStats
				i := 0
				for b.Loop() {
					svc := c.services[i%n]
					i++
					slice := c.slices[nn(svc)][0].DeepCopy()
					slice.Endpoints[3].Conditions.Ready = ptr.To(!*slice.Endpoints[3].Conditions.Ready)
					c.slices[nn(svc)][0] = slice
					var err error
					stats, err = s.partialSync(ctx, map[types.NamespacedName]*ServiceState{
						nn(svc): ComputeServiceState(svc, c.slices[nn(svc)], testParams),
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(stats.operations), "ops/tx")
			})
		})
	}
}

// BenchmarkComputeServiceStates is the Go side of a full sync of 1,000 Services: their
// states computed and the transaction written (into a knftables fake, which also applies
// it to its in-memory table).
func BenchmarkComputeServiceStates(b *testing.B) {
	c := newBenchCluster(1000)
	b.Run("compute", func(b *testing.B) {
		for b.Loop() {
			_ = c.desired()
		}
	})
	b.Run("compute+fake-full-sync", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			s := newSyncer(knftables.NewFake(knftables.IPv4Family, DefaultTable), []string{"172.31.0.5"}, testCluster,
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			if _, err := s.fullSync(ctx, c.desired()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
