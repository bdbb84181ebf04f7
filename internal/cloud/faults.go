package cloud

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Fault makes chosen operations fail, hang or slow down.
//
//	fail: the API call answers with Code (default InternalError) and changes nothing.
//	hang: the call succeeds but its transition (creating→available, attaching→attached,
//	      detaching→detached, modifying→optimizing, pending→completed) does not happen
//	      until the fault is cleared; a DetachVolume with Force=true still completes.
//	slow: the transition takes Delay longer.
type Fault struct {
	ID string `json:"id"`
	// Action is CreateVolume, DeleteVolume, AttachVolume, DetachVolume, ModifyVolume,
	// CreateSnapshot or RunInstances, or one of the network interfaces'
	// CreateNetworkInterface, DeleteNetworkInterface, AssignPrivateIpAddresses,
	// UnassignPrivateIpAddresses (fail), AttachNetworkInterface, DetachNetworkInterface
	// (fail; hang or slow hold the attachment in attaching or detaching), or one of the
	// load balancers' CreateLoadBalancer
	// (fail; hang or slow hold it in provisioning), DeleteLoadBalancer, CreateTargetGroup,
	// CreateListener, RegisterTargets (fail).
	Action string `json:"action"`
	// VolumeID, InstanceID and Tag ("key" or "key=value", matched against the volume's
	// tags, or the requested tags for CreateVolume) narrow the fault; empty matches all.
	VolumeID string `json:"volumeId,omitempty"`
	// NetworkInterfaceID narrows the faults of network interface actions.
	NetworkInterfaceID string `json:"networkInterfaceId,omitempty"`
	// LoadBalancer (a name or an ARN) narrows the faults of load balancer actions.
	LoadBalancer string `json:"loadBalancer,omitempty"`
	InstanceID   string `json:"instanceId,omitempty"`
	Tag          string `json:"tag,omitempty"`
	Mode         string `json:"mode"`
	// Delay is a Go duration ("5s") for mode slow.
	Delay   string `json:"delay,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Count is how many operations the fault applies to; 0 means until cleared.
	Count int `json:"count,omitempty"`
	// Hits is how many operations it applied to so far.
	Hits int `json:"hits"`

	delay time.Duration
}

var faultActions = map[string]bool{"CreateVolume": true, "DeleteVolume": true, "AttachVolume": true, "DetachVolume": true,
	"ModifyVolume": true, "CreateSnapshot": true, "RunInstances": true,
	"CreateLoadBalancer": true, "DeleteLoadBalancer": true, "CreateTargetGroup": true, "CreateListener": true, "RegisterTargets": true,
	"CreateNetworkInterface": true, "DeleteNetworkInterface": true, "AttachNetworkInterface": true, "DetachNetworkInterface": true,
	"AssignPrivateIpAddresses": true, "UnassignPrivateIpAddresses": true}

// eniFaultActions are the actions whose faults a NetworkInterfaceID narrows; only
// attachments and detachments have a transition to hold or slow.
var eniFaultActions = map[string]bool{"CreateNetworkInterface": false, "DeleteNetworkInterface": false,
	"AttachNetworkInterface": true, "DetachNetworkInterface": true, "AssignPrivateIpAddresses": false, "UnassignPrivateIpAddresses": false}

// elbFaultActions are the actions whose faults a LoadBalancer narrows; their resource is
// a load balancer's ARN.
var elbFaultActions = map[string]bool{"CreateLoadBalancer": true, "DeleteLoadBalancer": true, "CreateTargetGroup": true,
	"CreateListener": true, "RegisterTargets": true}

func (f *Fault) validate() error {
	if !faultActions[f.Action] {
		return fmt.Errorf("fault: unknown action %q (want CreateVolume, DeleteVolume, AttachVolume, DetachVolume, ModifyVolume, CreateSnapshot, RunInstances, CreateNetworkInterface, DeleteNetworkInterface, AttachNetworkInterface, DetachNetworkInterface, AssignPrivateIpAddresses, UnassignPrivateIpAddresses, CreateLoadBalancer, DeleteLoadBalancer, CreateTargetGroup, CreateListener or RegisterTargets)", f.Action)
	}
	switch f.Mode {
	case "fail", "hang":
	case "slow":
		d, err := time.ParseDuration(f.Delay)
		if err != nil || d <= 0 {
			return fmt.Errorf("fault: mode slow needs a positive delay such as \"5s\", not %q", f.Delay)
		}
		f.delay = d
	default:
		return fmt.Errorf("fault: unknown mode %q (want fail, hang or slow)", f.Mode)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault: count %d must not be negative", f.Count)
	}
	if f.Mode == "fail" && f.Action == "RunInstances" {
		return fmt.Errorf("fault: RunInstances takes hang or slow")
	}
	if hold, ok := eniFaultActions[f.Action]; ok && !hold && f.Mode != "fail" {
		return fmt.Errorf("fault: %s takes fail", f.Action)
	}
	if f.Mode != "fail" && elbFaultActions[f.Action] && f.Action != "CreateLoadBalancer" {
		return fmt.Errorf("fault: %s takes fail", f.Action)
	}
	return nil
}

func (f *Fault) apiError() *apiError {
	code, msg := f.Code, f.Message
	if code == "" {
		code = "InternalError"
	}
	if msg == "" {
		msg = "An internal error has occurred (injected fault " + f.ID + ")."
	}
	status := http.StatusBadRequest
	switch code {
	case "InternalError":
		status = http.StatusInternalServerError
	case "ServiceUnavailable", "RequestLimitExceeded", "Unavailable":
		status = http.StatusServiceUnavailable
	}
	return &apiError{Code: code, Message: msg, Status: status}
}

// matches says whether f applies to an operation: action on volumeID (for the load
// balancers' actions, the load balancer's ARN) and instanceID, with tags.
func (f *Fault) matches(action, volumeID, instanceID string, tags []Tag) bool {
	if f.Action != action || f.InstanceID != "" && f.InstanceID != instanceID {
		return false
	}
	if _, ok := eniFaultActions[action]; ok {
		if f.NetworkInterfaceID != "" && f.NetworkInterfaceID != volumeID {
			return false
		}
	} else if elbFaultActions[action] {
		if f.LoadBalancer != "" && f.LoadBalancer != volumeID && !strings.Contains(volumeID, "/"+f.LoadBalancer+"/") {
			return false
		}
	} else if f.VolumeID != "" && f.VolumeID != volumeID {
		return false
	}
	if f.Tag != "" {
		k, v, hasValue := strings.Cut(f.Tag, "=")
		tv, ok := tagValue(tags, k)
		if !ok || hasValue && tv != v {
			return false
		}
	}
	return f.Count == 0 || f.Hits < f.Count
}

// matchFaultLocked finds the first fault of mode for the operation and counts the hit.
// A fail or slow fault that has used its count is removed.
func (c *Cloud) matchFaultLocked(action, volumeID, instanceID string, tags []Tag, mode string) *Fault {
	for k, f := range c.faults {
		if f.Mode != mode || !f.matches(action, volumeID, instanceID, tags) {
			continue
		}
		f.Hits++
		c.log.Info("fault applied", "fault", f.ID, "mode", mode, "action", action, "volume", volumeID, "instance", instanceID)
		if mode != "hang" && f.Count > 0 && f.Hits >= f.Count {
			c.faults = append(c.faults[:k:k], c.faults[k+1:]...)
		}
		return f
	}
	return nil
}

// InjectFault adds a fault and returns its id.
func (c *Cloud) InjectFault(f Fault) (string, error) {
	if err := f.validate(); err != nil {
		return "", err
	}
	f.ID = newID("fault-")
	f.Hits = 0
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &f)
	return f.ID, nil
}

// ClearFaults removes the faults with the given ids (all faults when none are given) and
// lets the transitions they held proceed.
func (c *Cloud) ClearFaults(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ids) == 0 {
		c.faults = nil
	} else {
		drop := map[string]bool{}
		for _, id := range ids {
			drop[id] = true
		}
		var keep []*Fault
		for _, f := range c.faults {
			if !drop[f.ID] {
				keep = append(keep, f)
			}
		}
		c.faults = keep
	}
	c.unparkLocked()
}

// Faults lists the active faults.
func (c *Cloud) Faults() []Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Fault, len(c.faults))
	for i, f := range c.faults {
		out[i] = *f
	}
	return out
}

// serveFaults is the admin endpoint: POST a Fault, GET the list, DELETE one or all.
// adminOnly has checked the request's signature.
func (c *Cloud) serveFaults(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/_kubelab/faults"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && id == "":
		json.NewEncoder(w).Encode(c.Faults())
	case r.Method == http.MethodPost && id == "":
		var f Fault
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			http.Error(w, `{"error":`+jsonString("fault: "+err.Error())+`}`, http.StatusBadRequest)
			return
		}
		fid, err := c.InjectFault(f)
		if err != nil {
			http.Error(w, `{"error":`+jsonString(err.Error())+`}`, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "{\"id\":%s}\n", jsonString(fid))
	case r.Method == http.MethodDelete:
		if id == "" {
			c.ClearFaults()
		} else {
			c.ClearFaults(id)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, `{"error":"use GET or POST /_kubelab/faults, or DELETE /_kubelab/faults[/ID]"}`, http.StatusMethodNotAllowed)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
