package loadbalancer

// eligible returns the indices of the targets that may receive a new connection: the
// healthy ones when at least minHealthy are, else all of them (fail open).
func eligible(states []string, minHealthy int) []int {
	var healthy []int
	for i, s := range states {
		if s == "healthy" {
			healthy = append(healthy, i)
		}
	}
	if len(healthy) >= max(minHealthy, 1) {
		return healthy
	}
	all := make([]int, len(states))
	for i := range all {
		all[i] = i
	}
	return all
}

// pickWeighted picks an index by weight given r uniform in [0, sum of weights); -1 when
// every weight is 0.
func pickWeighted(weights []int, r int) int {
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return -1
}
