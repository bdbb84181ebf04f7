package ipamd

import (
	"net/netip"
	"reflect"
	"testing"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestMaxPods(t *testing.T) {
	for _, tc := range []struct {
		lim  Limits
		want int
	}{
		{Limits{MaxENIs: 3, IPv4PerENI: 10}, 29}, // m5.large
		{Limits{MaxENIs: 3, IPv4PerENI: 4}, 11},  // t3.small
		{Limits{MaxENIs: 2, IPv4PerENI: 2}, 4},   // t3.nano
		{Limits{MaxENIs: 4, IPv4PerENI: 15}, 58}, // m5.xlarge
	} {
		if got := MaxPods(tc.lim); got != tc.want {
			t.Errorf("MaxPods(%+v) = %d, want %d", tc.lim, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	small := Limits{MaxENIs: 3, IPv4PerENI: 4} // 3 secondary addresses per ENI
	for _, tc := range []struct {
		name string
		enis []PoolENI
		lim  Limits
		t    Targets
		want Decision
	}{
		{name: "default warm ENI fills the primary ENI",
			enis: []PoolENI{{ID: "eni-0", Primary: true}}, lim: small,
			want: Decision{Assign: []Assign{{ENI: "eni-0", Count: 3}}}},
		{name: "default warm ENI: a full ENI's worth free, nothing to do",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Freeable: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3")}}, lim: small,
			want: Decision{}},
		{name: "default warm ENI: one used, attach another ENI",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Used: 1}}, lim: small,
			want: Decision{AttachENI: true}},
		{name: "warm ENI target 2 attaches until two ENIs' worth are free",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Used: 1}}, lim: small,
			t: Targets{WarmENI: 2}, want: Decision{AttachENI: true}},
		{name: "no ENI beyond the instance type's",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Used: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Used: 3},
				{ID: "eni-2", DeviceNumber: 2, Assigned: 3, Used: 2}}, lim: small,
			want: Decision{}},
		{name: "surplus secondary ENI is deleted",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Freeable: addrs("10.0.0.4", "10.0.0.5", "10.0.0.6")}}, lim: small,
			want: Decision{DeleteENI: "eni-1"}},
		{name: "secondary ENI in cooldown stays",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Freeable: addrs("10.0.0.4")}}, lim: small,
			want: Decision{}},
		{name: "secondary ENI with a pod stays",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Used: 1}}, lim: small,
			want: Decision{}},
		{name: "warm IP target asks for used + warm",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 1, Used: 1}}, lim: small, t: Targets{WarmIP: 2},
			want: Decision{Assign: []Assign{{ENI: "eni-0", Count: 2}}}},
		{name: "warm IP target spills onto a new ENI",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 2, Used: 2}}, lim: small, t: Targets{WarmIP: 3},
			want: Decision{Assign: []Assign{{ENI: "eni-0", Count: 1}}, AttachENI: true}},
		{name: "minimum IP target wins over a smaller warm target",
			enis: []PoolENI{{ID: "eni-0", Primary: true}}, lim: small, t: Targets{WarmIP: 1, MinimumIP: 5},
			want: Decision{Assign: []Assign{{ENI: "eni-0", Count: 3}}, AttachENI: true}},
		{name: "minimum IP target alone, nothing used",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 1}, {ID: "eni-1", DeviceNumber: 1, Assigned: 1}}, lim: small, t: Targets{MinimumIP: 4},
			want: Decision{Assign: []Assign{{ENI: "eni-0", Count: 2}, {ENI: "eni-1", Count: 0 + 0}}}},
		{name: "warm IP surplus given back from the highest device, only what cooled down",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Used: 1, Freeable: addrs("10.0.0.2", "10.0.0.3")},
				{ID: "eni-1", DeviceNumber: 1, Assigned: 2, Freeable: addrs("10.0.0.5")}}, lim: small, t: Targets{WarmIP: 1},
			want: Decision{Unassign: []Unassign{{ENI: "eni-1", IPs: addrs("10.0.0.5")}, {ENI: "eni-0", IPs: addrs("10.0.0.2", "10.0.0.3")}}}},
		{name: "warm IP: at the target, nothing to do",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Used: 1, Freeable: addrs("10.0.0.2", "10.0.0.3")}}, lim: small, t: Targets{WarmIP: 2},
			want: Decision{}},
		{name: "warm IP at every limit",
			enis: []PoolENI{{ID: "eni-0", Primary: true, Assigned: 3, Used: 3}, {ID: "eni-1", DeviceNumber: 1, Assigned: 3, Used: 3},
				{ID: "eni-2", DeviceNumber: 2, Assigned: 3, Used: 3}}, lim: small, t: Targets{WarmIP: 1},
			want: Decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.enis, tc.lim, tc.t)
			// An Assign of 0 is no Assign.
			var want []Assign
			for _, a := range tc.want.Assign {
				if a.Count > 0 {
					want = append(want, a)
				}
			}
			tc.want.Assign = want
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v\nwant     %+v", got, tc.want)
			}
		})
	}
}
