package testutil

// Closed is a condition that holds once ch is closed: the Ready channel of a component,
// as the ready condition of Start.
func Closed[T any](ch <-chan T) func() bool {
	return func() bool {
		select {
		case _, ok := <-ch:
			return !ok
		default:
			return false
		}
	}
}
