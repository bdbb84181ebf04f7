package cloud

// describeQuery is what every Describe* action reads: the ids it names, its filters, its
// page size and token, and DryRun.
type describeQuery struct {
	ids     []string
	filters []filter
	max     int
	token   string
	dry     bool
}

// describeSpec says how one Describe* action reads its query: the parameter that names ids
// and their prefix, the MaxResults range, and whether naming ids excludes paging.
type describeSpec struct {
	idParam   string
	idPrefix  string
	minMax    int
	maxMax    int
	exclusive bool
}

// parseDescribe reads a Describe* query and checks it: malformed parameters first, then ids
// named together with paging (when the action forbids it), then each id's form. DryRun is
// returned, not acted on, so that the caller answers it after its own checks.
func parseDescribe(p *params, s describeSpec) (describeQuery, *apiError) {
	q := describeQuery{
		ids:     p.list(s.idParam),
		filters: p.filters(),
		max:     p.maxResults(s.minMax, s.maxMax),
		token:   p.str("NextToken"),
		dry:     p.dryRun(),
	}
	if p.err != nil {
		return q, p.err
	}
	if s.exclusive && len(q.ids) > 0 && (q.max > 0 || q.token != "") {
		return q, errf("InvalidParameterCombination", "The parameter %s cannot be used with the parameters MaxResults or NextToken.", s.idParam)
	}
	for _, id := range q.ids {
		if aerr := checkID(s.idPrefix, id); aerr != nil {
			return q, aerr
		}
	}
	return q, nil
}

// namedOrAll returns the ids a Describe* call lists before filtering: the named ones (each
// once; any that all lacks are reported together by notFound), or every key of all.
func namedOrAll[T any](all map[string]*T, ids []string, notFound func(ids ...string) *apiError) ([]string, *apiError) {
	var candidates, missing []string
	if len(ids) == 0 {
		for id := range all {
			candidates = append(candidates, id)
		}
		return candidates, nil
	}
	for _, id := range dedupe(ids) {
		if all[id] == nil {
			missing = append(missing, id)
		} else {
			candidates = append(candidates, id)
		}
	}
	if len(missing) > 0 {
		return nil, notFound(missing...)
	}
	return candidates, nil
}

// filterPage keeps the candidates whose objects match q's filters and returns the page q
// asks for with the next token. An unknown filter is an error even when nothing is listed.
func filterPage[T any](all map[string]*T, candidates []string, q describeQuery, fields func(*T) fieldsFunc) ([]string, string, *apiError) {
	var zero T
	if _, aerr := matchFilters(q.filters, fields(&zero)); aerr != nil {
		return nil, "", aerr
	}
	var matched []string
	for _, id := range candidates {
		ok, aerr := matchFilters(q.filters, fields(all[id]))
		if aerr != nil {
			return nil, "", aerr
		}
		if ok {
			matched = append(matched, id)
		}
	}
	return paginate(matched, q.max, q.token)
}

// selectPage is namedOrAll followed by filterPage: the page of ids a Describe* call answers.
func selectPage[T any](all map[string]*T, q describeQuery, fields func(*T) fieldsFunc, notFound func(ids ...string) *apiError) ([]string, string, *apiError) {
	candidates, aerr := namedOrAll(all, q.ids, notFound)
	if aerr != nil {
		return nil, "", aerr
	}
	return filterPage(all, candidates, q, fields)
}
