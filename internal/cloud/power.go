package cloud

// StopInstances and StartInstances: an EBS-backed instance stops (running → stopping →
// stopped) and starts again (stopped → pending → running) with its volumes attached, as
// EC2 keeps them; its metadata service is down while it is not running.

type stopInstancesResponse struct {
	respBase
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type startInstancesResponse struct {
	respBase
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

// powerTransition is one leg of a stop or a start: an instance in one of from moves to
// via at once and to next after the profile's latency; one already in via or next is
// answered as it is.
type powerTransition struct {
	action    string
	from      []string
	via, next string
}

var (
	stopTransition  = powerTransition{action: "StopInstances", from: []string{"running", "pending"}, via: "stopping", next: "stopped"}
	startTransition = powerTransition{action: "StartInstances", from: []string{"stopped"}, via: "pending", next: "running"}
)

func (c *Cloud) stopInstances(p *params) (response, *apiError) {
	changes, aerr := c.power(p, stopTransition)
	if aerr != nil {
		return nil, aerr
	}
	return &stopInstancesResponse{Instances: changes}, nil
}

func (c *Cloud) startInstances(p *params) (response, *apiError) {
	changes, aerr := c.power(p, startTransition)
	if aerr != nil {
		return nil, aerr
	}
	return &startInstancesResponse{Instances: changes}, nil
}

// power checks every named instance first (unknown ones, ones in a state the action
// cannot leave: IncorrectInstanceState), so that a refused request changes nothing.
func (c *Cloud) power(p *params, t powerTransition) ([]xmlStateChange, *apiError) {
	ids := p.list("InstanceId")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if len(ids) == 0 {
		return nil, errMissing("InstanceId")
	}
	for _, id := range ids {
		if aerr := checkID("i-", id); aerr != nil {
			return nil, aerr
		}
	}
	ids = dedupe(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if c.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errInstanceNotFound(missing...)
	}
	for _, id := range ids {
		if s := c.instances[id].State; !powerAllowed(t, s) {
			return nil, errf("IncorrectInstanceState", "This instance '%s' is not in a state from which it can be %s.", id, map[string]string{"StopInstances": "stopped", "StartInstances": "started"}[t.action])
		}
	}
	if dry {
		return nil, errDryRun()
	}
	var out []xmlStateChange
	for _, id := range ids {
		prev := c.instances[id].State
		if prev != t.via && prev != t.next {
			ni := c.instances[id].clone()
			ni.State = t.via
			if aerr := c.persist(put(bucketInstances, id, ni)); aerr != nil {
				return nil, aerr
			}
			c.instances[id] = ni
			if t.via == "stopping" {
				c.stopIMDSLocked(id)
			}
			c.after(c.lat.Create, t.action, "", id, ni.Tags, func() { c.finishPowerLocked(id, t) })
		}
		out = append(out, xmlStateChange{InstanceID: id, CurrentState: instanceState(c.instances[id].State), PreviousState: instanceState(prev)})
	}
	return out, nil
}

// powerAllowed tells whether an instance in state s can take t (or is already on its way).
func powerAllowed(t powerTransition, s string) bool {
	if s == t.via || s == t.next {
		return true
	}
	for _, f := range t.from {
		if s == f {
			return true
		}
	}
	return false
}

// finishPowerLocked completes t's second leg unless the instance has moved on since.
func (c *Cloud) finishPowerLocked(id string, t powerTransition) {
	cur := c.instances[id]
	if cur == nil || cur.State != t.via {
		return
	}
	ni := cur.clone()
	ni.State = t.next
	if c.persist(put(bucketInstances, id, ni)) != nil {
		return
	}
	c.instances[id] = ni
	if t.next == "running" {
		c.startIMDSLocked(ni)
	}
}
