package cloud

import "strings"

// elbTagged is one taggable ELB resource as read for a tag change: its tags and how to
// store new ones.
type elbTagged struct {
	tags []Tag
	save func(tags []Tag) (change, func())
}

// taggedLocked finds the resource an ARN names.
func (c *Cloud) taggedLocked(arn string) (*elbTagged, *apiError) {
	switch {
	case strings.Contains(arn, ":loadbalancer/"):
		lb := c.lbs[arn]
		if lb == nil {
			return nil, errLBNotFound()
		}
		return &elbTagged{lb.Tags, func(tags []Tag) (change, func()) {
			n := lb.clone()
			n.Tags = tags
			return put(bucketLoadBalancers, arn, n), func() { c.lbs[arn] = n }
		}}, nil
	case strings.Contains(arn, ":targetgroup/"):
		tg := c.tgs[arn]
		if tg == nil {
			return nil, errTGNotFound()
		}
		return &elbTagged{tg.Tags, func(tags []Tag) (change, func()) {
			n := tg.clone()
			n.Tags = tags
			return put(bucketTargetGroups, arn, n), func() { c.tgs[arn] = n }
		}}, nil
	case strings.Contains(arn, ":listener/"):
		l := c.listeners[arn]
		if l == nil {
			return nil, errListenerNotFound()
		}
		return &elbTagged{l.Tags, func(tags []Tag) (change, func()) {
			n := l.clone()
			n.Tags = tags
			return put(bucketListeners, arn, n), func() { c.listeners[arn] = n }
		}}, nil
	case strings.Contains(arn, ":listener-rule/"):
		r := c.rules[arn]
		if r == nil {
			return nil, errRuleNotFound()
		}
		return &elbTagged{r.Tags, func(tags []Tag) (change, func()) {
			n := r.clone()
			n.Tags = tags
			return put(bucketRules, arn, n), func() { c.rules[arn] = n }
		}}, nil
	}
	return nil, errValidation("'%s' is not a valid load balancer, target group, listener or rule ARN", arn)
}

// retagELB applies edit to the tags of every resource in arns: all or none.
func (c *Cloud) retagELB(arns []string, edit func([]Tag) ([]Tag, *apiError)) (any, *apiError) {
	if len(arns) == 0 {
		return nil, errValidation("At least one resource ARN must be specified")
	}
	if len(arns) > 20 {
		return nil, errValidation("At most 20 resource ARNs can be specified")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var changes []change
	var commits []func()
	for _, arn := range dedupe(arns) {
		r, aerr := c.taggedLocked(arn)
		if aerr != nil {
			return nil, aerr
		}
		tags, aerr := edit(r.tags)
		if aerr != nil {
			return nil, aerr
		}
		ch, commit := r.save(tags)
		changes = append(changes, ch)
		commits = append(commits, commit)
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	for _, f := range commits {
		f()
	}
	return &emptyResult{}, nil
}

func (c *Cloud) addTags(p *eparams) (any, *apiError) {
	arns := p.members("ResourceArns")
	tags := p.elbTags()
	if p.err != nil {
		return nil, p.err
	}
	if len(tags) == 0 {
		return nil, errValidation("At least one tag must be specified")
	}
	return c.retagELB(arns, func(old []Tag) ([]Tag, *apiError) {
		n := mergeTags(old, tags)
		if len(n) > maxTags {
			return nil, elbErr("TooManyTags", "A resource can have at most %d tags", maxTags)
		}
		return n, nil
	})
}

func (c *Cloud) removeTags(p *eparams) (any, *apiError) {
	arns := p.members("ResourceArns")
	keys := p.members("TagKeys")
	if p.err != nil {
		return nil, p.err
	}
	if len(keys) == 0 {
		return nil, errValidation("At least one tag key must be specified")
	}
	dels := make([]tagDel, len(keys))
	for i, k := range keys {
		dels[i] = tagDel{Key: k}
	}
	return c.retagELB(arns, func(old []Tag) ([]Tag, *apiError) { return removeTags(old, dels), nil })
}

type xmlELBTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlTagDescription struct {
	ResourceArn string      `xml:"ResourceArn"`
	Tags        []xmlELBTag `xml:"Tags>member"`
}

type tagsResult struct {
	TagDescriptions []xmlTagDescription `xml:"TagDescriptions>member"`
}

func (c *Cloud) describeTags(p *eparams) (any, *apiError) {
	arns := p.members("ResourceArns")
	if p.err != nil {
		return nil, p.err
	}
	if len(arns) == 0 {
		return nil, errValidation("At least one resource ARN must be specified")
	}
	if len(arns) > 20 {
		return nil, errValidation("At most 20 resource ARNs can be specified")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &tagsResult{}
	for _, arn := range dedupe(arns) {
		r, aerr := c.taggedLocked(arn)
		if aerr != nil {
			return nil, aerr
		}
		d := xmlTagDescription{ResourceArn: arn, Tags: []xmlELBTag{}}
		for _, t := range r.tags {
			d.Tags = append(d.Tags, xmlELBTag{t.Key, t.Value})
		}
		resp.TagDescriptions = append(resp.TagDescriptions, d)
	}
	return resp, nil
}
