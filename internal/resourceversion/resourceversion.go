package resourceversion

import "strconv"

// Older reports whether rv comes before than. Versions that do not parse as numbers
// (or are empty) are not ordered, and not older.
func Older(rv, than string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(than, 10, 64)
	return errA == nil && errB == nil && a < b
}
