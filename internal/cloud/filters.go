package cloud

import (
	"encoding/base64"
	"regexp"
	"sort"
	"strings"
)

// fieldsFunc returns the values an object has under a filter name, and whether the name
// is a known filter.
type fieldsFunc func(name string) ([]string, bool)

// matchFilters reports whether an object matches every filter (any value of a filter may
// match; values may use the wildcards * and ?). An unknown filter name is an error.
func matchFilters(fs []filter, fields fieldsFunc) (bool, *apiError) {
	for _, f := range fs {
		have, ok := fields(f.Name)
		if !ok {
			return false, errf("InvalidParameterValue", "The filter '%s' is invalid", f.Name)
		}
		if !anyMatch(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if wildcardMatch(p, v) {
				return true
			}
		}
	}
	return false
}

func wildcardMatch(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	ok, _ := regexp.MatchString(re, s)
	return ok
}

// tagFields answers the tag:KEY and tag-key filters.
func tagFields(tags []Tag, name string) ([]string, bool) {
	if key, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, ok := tagValue(tags, key); ok {
			return []string{v}, true
		}
		return nil, true
	}
	if name == "tag-key" {
		keys := make([]string, len(tags))
		for i, t := range tags {
			keys[i] = t.Key
		}
		return keys, true
	}
	return nil, false
}

// paginate returns the page of ids (sorted) that follows token, at most max long (0 = all),
// and the token of the next page ("" at the end).
func paginate(ids []string, max int, token string) ([]string, string, *apiError) {
	sort.Strings(ids)
	start := 0
	if token != "" {
		after, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || len(after) == 0 {
			return nil, "", errInvalid("NextToken", token, "The token is not one this service returned.")
		}
		start = sort.SearchStrings(ids, string(after))
		if start < len(ids) && ids[start] == string(after) {
			start++
		}
	}
	if max == 0 || start+max >= len(ids) {
		return ids[start:], "", nil
	}
	page := ids[start : start+max]
	return page, base64.RawURLEncoding.EncodeToString([]byte(page[len(page)-1])), nil
}
