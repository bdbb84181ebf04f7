package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The rules of resource.k8s.io/v1, with kube-apiserver's limits and messages. CEL
// expressions (device selectors) are parsed but not type-checked: kubelab has no DRA CEL
// environment (the device's attributes and capacity) to check them in, and no component
// evaluates them.

// validateDeviceClassSpec: selectors and opaque configurations, an extended resource name.
func validateDeviceClassSpec(spec *resourcev1.DeviceClassSpec, p *field.Path) field.ErrorList {
	errs := draMaxItems(p.Child("selectors"), len(spec.Selectors), resourcev1.DeviceSelectorsMaxSize)
	if errs == nil {
		for i := range spec.Selectors {
			errs = append(errs, validateDeviceSelector(&spec.Selectors[i], p.Child("selectors").Index(i))...)
		}
	}
	if tooMany := draMaxItems(p.Child("config"), len(spec.Config), resourcev1.DeviceConfigMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i := range spec.Config {
			errs = append(errs, validateDeviceConfiguration(&spec.Config[i].DeviceConfiguration, p.Child("config").Index(i))...)
		}
	}
	if n := spec.ExtendedResourceName; n != nil && !isExtendedResourceName(*n) {
		errs = append(errs, field.Invalid(p.Child("extendedResourceName"), *n, "must be a valid extended resource name"))
	}
	return errs
}

// isExtendedResourceName: a domain-qualified resource name outside kubernetes.io, not
// a quota's "requests." name, that is also valid with that prefix.
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

// validateResourceClaimSpec checks the requests (unique names, exactly one of exactly
// and firstAvailable), the constraints and configurations naming them.
func validateResourceClaimSpec(spec *resourcev1.ResourceClaimSpec, p *field.Path) field.ErrorList {
	dp := p.Child("devices")
	names := deviceRequestNames(spec.Devices.Requests)
	var errs field.ErrorList
	if tooMany := draMaxItems(dp.Child("requests"), len(spec.Devices.Requests), resourcev1.DeviceRequestsMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		seen := sets.New[string]()
		for i := range spec.Devices.Requests {
			rp := dp.Child("requests").Index(i)
			r := &spec.Devices.Requests[i]
			errs = append(errs, validateDeviceRequest(r, rp)...)
			if seen.Has(r.Name) {
				errs = append(errs, field.Duplicate(rp, r.Name))
			}
			seen.Insert(r.Name)
		}
	}
	if tooMany := draMaxItems(dp.Child("constraints"), len(spec.Devices.Constraints), resourcev1.DeviceConstraintsMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i, c := range spec.Devices.Constraints {
			cp := dp.Child("constraints").Index(i)
			errs = append(errs, validateRequestRefs(c.Requests, names, cp.Child("requests"))...)
			switch {
			case c.MatchAttribute != nil:
				errs = append(errs, validateFullyQualifiedName(string(*c.MatchAttribute), cp.Child("matchAttribute"))...)
			case c.DistinctAttribute != nil:
				errs = append(errs, validateFullyQualifiedName(string(*c.DistinctAttribute), cp.Child("distinctAttribute"))...)
			default:
				errs = append(errs, field.Required(cp, `exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set`))
			}
		}
	}
	if tooMany := draMaxItems(dp.Child("config"), len(spec.Devices.Config), resourcev1.DeviceConfigMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i := range spec.Devices.Config {
			cp := dp.Child("config").Index(i)
			errs = append(errs, validateRequestRefs(spec.Devices.Config[i].Requests, names, cp.Child("requests"))...)
			errs = append(errs, validateDeviceConfiguration(&spec.Devices.Config[i].DeviceConfiguration, cp)...)
		}
	}
	return errs
}

// deviceRequestNames maps each request's name to the names of its subrequests.
func deviceRequestNames(requests []resourcev1.DeviceRequest) map[string]sets.Set[string] {
	names := map[string]sets.Set[string]{}
	for _, r := range requests {
		subs := sets.New[string]()
		for _, s := range r.FirstAvailable {
			subs.Insert(s.Name)
		}
		names[r.Name] = subs
	}
	return names
}

// hasRequest: ref is "<request>" or "<request>/<subrequest>" of the claim.
func hasRequest(names map[string]sets.Set[string], ref string) bool {
	req, sub, isSub := strings.Cut(ref, "/")
	subs, ok := names[req]
	if !ok {
		return false
	}
	return !isSub || subs.Has(sub)
}

const requestRefMessage = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

// validateRequestRefs: unique references to requests (or subrequests) of the claim.
func validateRequestRefs(refs []string, names map[string]sets.Set[string], p *field.Path) field.ErrorList {
	if tooMany := draMaxItems(p, len(refs), resourcev1.DeviceRequestsMaxSize); tooMany != nil {
		return tooMany
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, ref := range refs {
		ip := p.Index(i)
		segments := strings.Split(ref, "/")
		if len(segments) > 2 {
			errs = append(errs, field.Invalid(ip, ref, requestRefMessage))
		} else {
			for _, s := range segments {
				errs = append(errs, draDNSLabel(s, ip)...)
			}
			if !hasRequest(names, ref) {
				errs = append(errs, field.Invalid(ip, ref, requestRefMessage))
			}
		}
		if seen.Has(ref) {
			errs = append(errs, field.Duplicate(ip, ref))
		}
		seen.Insert(ref)
	}
	return errs
}

// validateDeviceRequest: a DNS label name and exactly one of exactly and firstAvailable.
func validateDeviceRequest(r *resourcev1.DeviceRequest, p *field.Path) field.ErrorList {
	errs := draDNSLabel(r.Name, p.Child("name"))
	switch {
	case r.Exactly == nil && len(r.FirstAvailable) == 0:
		errs = append(errs, field.Required(p, "exactly one of `exactly` or `firstAvailable` is required"))
	case r.Exactly != nil && len(r.FirstAvailable) > 0:
		errs = append(errs, field.Invalid(p, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case r.Exactly != nil:
		e := r.Exactly
		ep := p.Child("exactly")
		errs = append(errs, validateDeviceClassRef(e.DeviceClassName, ep.Child("deviceClassName"))...)
		errs = append(errs, validateDeviceSelectors(e.Selectors, ep.Child("selectors"))...)
		errs = append(errs, validateAllocationMode(e.AllocationMode, e.Count, ep)...)
		errs = append(errs, validateDeviceTolerations(e.Tolerations, ep.Child("tolerations"))...)
	default:
		fp := p.Child("firstAvailable")
		if tooMany := draMaxItems(fp, len(r.FirstAvailable), resourcev1.FirstAvailableDeviceRequestMaxSize); tooMany != nil {
			return append(errs, tooMany...)
		}
		seen := sets.New[string]()
		for i := range r.FirstAvailable {
			s := &r.FirstAvailable[i]
			sp := fp.Index(i)
			errs = append(errs, draDNSLabel(s.Name, sp.Child("name"))...)
			errs = append(errs, validateDeviceClassRef(s.DeviceClassName, sp.Child("deviceClassName"))...)
			errs = append(errs, validateDeviceSelectors(s.Selectors, sp.Child("selectors"))...)
			errs = append(errs, validateAllocationMode(s.AllocationMode, s.Count, sp)...)
			errs = append(errs, validateDeviceTolerations(s.Tolerations, sp.Child("tolerations"))...)
			if seen.Has(s.Name) {
				errs = append(errs, field.Duplicate(sp, s.Name))
			}
			seen.Insert(s.Name)
		}
	}
	return errs
}

func validateDeviceClassRef(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// validateAllocationMode: All takes no count, ExactCount a positive one.
func validateAllocationMode(mode resourcev1.DeviceAllocationMode, count int64, p *field.Path) field.ErrorList {
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(p.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(p.Child("count"), count, "must be greater than zero")}
		}
	default:
		return field.ErrorList{field.NotSupported(p.Child("allocationMode"), mode,
			[]resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount})}
	}
	return nil
}

func validateDeviceSelectors(selectors []resourcev1.DeviceSelector, p *field.Path) field.ErrorList {
	if tooMany := draMaxItems(p, len(selectors), resourcev1.DeviceSelectorsMaxSize); tooMany != nil {
		return tooMany
	}
	var errs field.ErrorList
	for i := range selectors {
		errs = append(errs, validateDeviceSelector(&selectors[i], p.Index(i))...)
	}
	return errs
}

// validateDeviceSelector: a CEL expression, not too long, that parses.
func validateDeviceSelector(s *resourcev1.DeviceSelector, p *field.Path) field.ErrorList {
	if s.CEL == nil {
		return field.ErrorList{field.Required(p.Child("cel"), "")}
	}
	ep := p.Child("cel", "expression")
	expr := s.CEL.Expression
	if len(expr) > resourcev1.CELSelectorExpressionMaxLength {
		return field.ErrorList{field.TooLong(ep, "", resourcev1.CELSelectorExpressionMaxLength)}
	}
	env, err := celEnv().Env(environment.NewExpressions)
	if err != nil {
		return field.ErrorList{field.InternalError(ep, err)}
	}
	if _, issues := env.Parse(expr); issues != nil && issues.Err() != nil {
		return field.ErrorList{field.Invalid(ep, expr, "compilation failed: "+issues.String())}
	}
	return nil
}

var validDeviceTaintEffects = []resourcev1.DeviceTaintEffect{
	resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNone}

func validateDeviceTolerations(tolerations []resourcev1.DeviceToleration, p *field.Path) field.ErrorList {
	if tooMany := draMaxItems(p, len(tolerations), resourcev1.DeviceTolerationsMaxLength); tooMany != nil {
		return tooMany
	}
	var errs field.ErrorList
	for i, t := range tolerations {
		tp := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, tp.Child("key"))...)
		}
		switch t.Operator {
		case resourcev1.DeviceTolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, "must be empty for operator `Exists`"))
			}
		case resourcev1.DeviceTolerationOpEqual:
			errs = append(errs, draLabelValue(t.Value, tp.Child("value"))...)
		case "":
			errs = append(errs, field.Required(tp.Child("operator"), ""))
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator,
				[]resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}))
		}
		if t.Effect != "" && !containsEffect(t.Effect) {
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, validDeviceTaintEffects))
		}
	}
	return errs
}

func containsEffect(e resourcev1.DeviceTaintEffect) bool {
	for _, v := range validDeviceTaintEffects {
		if v == e {
			return true
		}
	}
	return false
}

// validateDeviceConfiguration: an opaque configuration for a driver, whose parameters
// are a JSON object of at most 10 KiB.
func validateDeviceConfiguration(c *resourcev1.DeviceConfiguration, p *field.Path) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(p.Child("opaque"), "")}
	}
	op := p.Child("opaque")
	errs := validateDRADriverName(c.Opaque.Driver, op.Child("driver"))
	return append(errs, validateRawJSONObject(c.Opaque.Parameters, op.Child("parameters"), resourcev1.OpaqueParametersMaxLength)...)
}

func validateRawJSONObject(raw runtime.RawExtension, p *field.Path, maxLen int) field.ErrorList {
	var v any
	switch {
	case len(raw.Raw) == 0:
		return field.ErrorList{field.Required(p, "")}
	case len(raw.Raw) > maxLen:
		return field.ErrorList{field.TooLong(p, "", maxLen)}
	}
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return field.ErrorList{field.Invalid(p, "<value omitted>", "error parsing data as JSON: "+err.Error())}
	}
	switch v.(type) {
	case nil:
		return field.ErrorList{field.Required(p, "")}
	case map[string]any:
		return nil
	}
	return field.ErrorList{field.Invalid(p, "<value omitted>", "must be a valid JSON object")}
}

// validateDRADriverName: a DNS subdomain (of any case) of at most 63 characters.
func validateDRADriverName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.DriverNameMaxLength {
		errs = append(errs, field.TooLong(p, "", resourcev1.DriverNameMaxLength))
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// validatePoolName: "/"-separated DNS subdomains, at most 253 characters in all.
func validatePoolName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		errs = append(errs, field.TooLong(p, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(part) {
			errs = append(errs, field.Invalid(p, part, msg))
		}
	}
	return errs
}

func draDNSLabel(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func draLabelValue(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsValidLabelValue(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// draMaxItems is the error of a list longer than max, or nil.
func draMaxItems(p *field.Path, n, max int) field.ErrorList {
	if n > max {
		return field.ErrorList{field.TooMany(p, n, max)}
	}
	return nil
}

// validateQualifiedAttributeName: a C identifier of at most 32 characters, optionally
// after a driver-name domain and a "/".
func validateQualifiedAttributeName(name string, p *field.Path) field.ErrorList {
	domain, id, qualified := strings.Cut(name, "/")
	if !qualified {
		return validateCIdentifier(name, p)
	}
	var errs field.ErrorList
	if domain == "" {
		errs = append(errs, field.Invalid(p, "", "the domain must not be empty"))
	} else {
		errs = append(errs, validateDRADriverName(domain, p)...)
	}
	if id == "" {
		errs = append(errs, field.Invalid(p, "", "the name must not be empty"))
	} else {
		errs = append(errs, validateCIdentifier(id, p)...)
	}
	return errs
}

// validateFullyQualifiedName: a qualified attribute name that has its domain.
func validateFullyQualifiedName(name string, p *field.Path) field.ErrorList {
	errs := validateQualifiedAttributeName(name, p)
	if !strings.Contains(name, "/") {
		errs = append(errs, field.Invalid(p, name, "a fully qualified name must be a domain and a name separated by a slash"))
	}
	return errs
}

func validateCIdentifier(id string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(id) > resourcev1.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(p, "", resourcev1.DeviceMaxIDLength))
	}
	for _, msg := range content.IsCIdentifier(id) {
		errs = append(errs, field.Invalid(p, id, msg))
	}
	return errs
}

// validateTemplateObjectMeta: a template's metadata may only have labels and annotations.
func validateTemplateObjectMeta(m *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	t, v := reflect.TypeOf(*m), reflect.ValueOf(*m)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Labels" || f.Name == "Annotations" || v.Field(i).IsZero() {
			continue
		}
		r, n := utf8.DecodeRuneInString(f.Name)
		errs = append(errs, field.Forbidden(p.Child(string(unicode.ToLower(r))+f.Name[n:]), "cannot be set"))
	}
	return errs
}

// validateResourceClaimStatusUpdate checks a claim's new status: consumers, an
// allocation that, once made, does not change, and device statuses of allocated devices.
func validateResourceClaimStatusUpdate(c, old *resourcev1.ResourceClaim) field.ErrorList {
	p := field.NewPath("status")
	status := &c.Status
	var errs field.ErrorList
	if tooMany := draMaxItems(p.Child("reservedFor"), len(status.ReservedFor), resourcev1.ResourceClaimReservedForMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		seen := sets.New[types.UID]()
		for i, ref := range status.ReservedFor {
			rp := p.Child("reservedFor").Index(i)
			if ref.Resource == "" {
				errs = append(errs, field.Required(rp.Child("resource"), ""))
			}
			if ref.Name == "" {
				errs = append(errs, field.Required(rp.Child("name"), ""))
			}
			if ref.UID == "" {
				errs = append(errs, field.Required(rp.Child("uid"), ""))
			}
			if seen.Has(ref.UID) {
				errs = append(errs, field.Duplicate(rp, ref.UID))
			}
			seen.Insert(ref.UID)
		}
	}
	if len(status.ReservedFor) > 0 {
		if status.Allocation == nil {
			errs = append(errs, field.Forbidden(p.Child("reservedFor"), "may not be specified when `allocated` is not set"))
		} else if c.DeletionTimestamp != nil {
			oldRefs := sets.New(old.Status.ReservedFor...)
			for _, ref := range status.ReservedFor {
				if !oldRefs.Has(ref) {
					errs = append(errs, field.Forbidden(p.Child("reservedFor"), "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
					break
				}
			}
		}
	}
	names := deviceRequestNames(c.Spec.Devices.Requests)
	switch {
	case old.Status.Allocation != nil && status.Allocation != nil:
		errs = append(errs, apivalidation.ValidateImmutableField(status.Allocation, old.Status.Allocation, p.Child("allocation"))...)
	case status.Allocation != nil:
		errs = append(errs, validateAllocationResult(status.Allocation, names, p.Child("allocation"))...)
	}
	allocated := sets.New[string]()
	if status.Allocation != nil {
		for _, r := range status.Allocation.Devices.Results {
			allocated.Insert(sharedDeviceID(r.Driver, r.Pool, r.Device, (*string)(r.ShareID)))
		}
	}
	seen := sets.New[string]()
	for i, d := range status.Devices {
		dp := p.Child("devices").Index(i)
		errs = append(errs, validateDRADriverName(d.Driver, dp.Child("driver"))...)
		errs = append(errs, validatePoolName(d.Pool, dp.Child("pool"))...)
		errs = append(errs, draDNSLabel(d.Device, dp.Child("device"))...)
		if d.ShareID != nil {
			errs = append(errs, validateUUID(*d.ShareID, dp.Child("shareID"))...)
		}
		id := sharedDeviceID(d.Driver, d.Pool, d.Device, d.ShareID)
		if !allocated.Has(id) {
			errs = append(errs, field.Invalid(dp, id, "must be an allocated device in the claim"))
		}
		if seen.Has(id) {
			errs = append(errs, field.Duplicate(dp, id))
		}
		seen.Insert(id)
		errs = append(errs, metav1validation.ValidateConditions(d.Conditions, dp.Child("conditions"))...)
		if d.Data != nil && len(d.Data.Raw) > 0 {
			errs = append(errs, validateRawJSONObject(*d.Data, dp.Child("data"), resourcev1.AllocatedDeviceStatusDataMaxLength)...)
		}
	}
	return errs
}

func sharedDeviceID(driver, pool, device string, shareID *string) string {
	id := driver + "/" + pool + "/" + device
	if shareID != nil {
		id += "/" + *shareID
	}
	return id
}

var uuidLower = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func validateUUID(uid string, p *field.Path) field.ErrorList {
	if !uuidLower.MatchString(uid) {
		return field.ErrorList{field.Invalid(p, uid, "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")}
	}
	return nil
}

// validateAllocationResult checks a new allocation: results for requests of the claim
// from valid drivers, pools and devices; configurations from the claim or the class.
func validateAllocationResult(a *resourcev1.AllocationResult, names map[string]sets.Set[string], p *field.Path) field.ErrorList {
	dp := p.Child("devices")
	var errs field.ErrorList
	if tooMany := draMaxItems(dp.Child("results"), len(a.Devices.Results), resourcev1.AllocationResultsMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i, r := range a.Devices.Results {
			rp := dp.Child("results").Index(i)
			errs = append(errs, validateRequestRefs([]string{r.Request}, names, rp.Child("request"))...)
			errs = append(errs, validateDRADriverName(r.Driver, rp.Child("driver"))...)
			errs = append(errs, validatePoolName(r.Pool, rp.Child("pool"))...)
			errs = append(errs, draDNSLabel(r.Device, rp.Child("device"))...)
			errs = append(errs, validateDeviceTolerations(r.Tolerations, rp.Child("tolerations"))...)
			if r.ShareID != nil {
				errs = append(errs, validateUUID(string(*r.ShareID), rp.Child("shareID"))...)
			}
		}
	}
	if tooMany := draMaxItems(dp.Child("config"), len(a.Devices.Config), 2*resourcev1.DeviceConfigMaxSize); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i := range a.Devices.Config {
			c := &a.Devices.Config[i]
			cp := dp.Child("config").Index(i)
			switch c.Source {
			case resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass:
			case "":
				errs = append(errs, field.Required(cp.Child("source"), ""))
			default:
				errs = append(errs, field.NotSupported(cp.Child("source"), c.Source,
					[]resourcev1.AllocationConfigSource{resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass}))
			}
			errs = append(errs, validateRequestRefs(c.Requests, names, cp.Child("requests"))...)
			errs = append(errs, validateDeviceConfiguration(&c.DeviceConfiguration, cp)...)
		}
	}
	if a.NodeSelector != nil {
		errs = append(errs, validateNodeSelector(a.NodeSelector, p.Child("nodeSelector"))...)
	}
	return errs
}

// validateNodeSelector: at least one term; each requirement a label key, an operator
// and the values the operator takes.
func validateNodeSelector(s *corev1.NodeSelector, p *field.Path) field.ErrorList {
	tp := p.Child("nodeSelectorTerms")
	if len(s.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(tp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range s.NodeSelectorTerms {
		for j, req := range term.MatchExpressions {
			errs = append(errs, validateNodeSelectorRequirement(req, tp.Index(i).Child("matchExpressions").Index(j), true)...)
		}
		for j, req := range term.MatchFields {
			errs = append(errs, validateNodeSelectorRequirement(req, tp.Index(i).Child("matchFields").Index(j), false)...)
		}
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, p *field.Path, labels bool) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 && labels {
			errs = append(errs, field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 && labels {
			errs = append(errs, field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if !labels {
		if req.Key != metav1.ObjectNameField {
			errs = append(errs, field.Invalid(p.Child("key"), req.Key, "not a valid field selector key"))
		}
		return errs
	}
	errs = append(errs, metav1validation.ValidateLabelName(req.Key, p.Child("key"))...)
	for i, v := range req.Values {
		errs = append(errs, draLabelValue(v, p.Child("values").Index(i))...)
	}
	return errs
}

// validateResourceSliceSpec: a driver, a pool, exactly one way of naming its nodes, and
// devices with unique names, valid attributes and taints.
func validateResourceSliceSpec(spec *resourcev1.ResourceSliceSpec, p *field.Path) field.ErrorList {
	errs := validateDRADriverName(spec.Driver, p.Child("driver"))
	pp := p.Child("pool")
	errs = append(errs, validatePoolName(spec.Pool.Name, pp.Child("name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(pp.Child("resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(pp.Child("generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	var set []string
	if n := spec.NodeName; n != nil {
		if *n == "" {
			errs = append(errs, field.Invalid(p.Child("nodeName"), *n, "must be either unset or set to a non-empty string"))
		} else {
			set = append(set, "`nodeName`")
			for _, msg := range apivalidation.NameIsDNSSubdomain(*n, false) {
				errs = append(errs, field.Invalid(p.Child("nodeName"), *n, msg))
			}
		}
	}
	if s := spec.NodeSelector; s != nil {
		set = append(set, "`nodeSelector`")
		errs = append(errs, validateNodeSelector(s, p.Child("nodeSelector"))...)
		if len(s.NodeSelectorTerms) != 1 {
			errs = append(errs, field.Invalid(p.Child("nodeSelector", "nodeSelectorTerms"), s.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	for _, b := range []struct {
		name string
		v    *bool
	}{{"allNodes", spec.AllNodes}, {"perDeviceNodeSelection", spec.PerDeviceNodeSelection}} {
		switch {
		case b.v == nil:
		case *b.v:
			set = append(set, "`"+b.name+"`")
		default:
			errs = append(errs, field.Invalid(p.Child(b.name), *b.v, "must be either unset or set to true"))
		}
	}
	const oneOf = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(p, oneOf))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, "{"+strings.Join(set, ", ")+"}", oneOf+", but multiple fields are set"))
	}
	if spec.SharedCounters != nil && spec.Devices != nil {
		errs = append(errs, field.Invalid(p, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	maxDevices := resourcev1.ResourceSliceMaxDevices
	for _, d := range spec.Devices {
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			maxDevices = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
	}
	devp := p.Child("devices")
	if tooMany := draMaxItems(devp, len(spec.Devices), maxDevices); tooMany != nil {
		return append(errs, tooMany...)
	}
	perDevice := spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection
	seen := sets.New[string]()
	for i := range spec.Devices {
		d := &spec.Devices[i]
		dp := devp.Index(i)
		errs = append(errs, validateDevice(d, dp, perDevice)...)
		if seen.Has(d.Name) {
			errs = append(errs, field.Duplicate(dp, d.Name))
		}
		seen.Insert(d.Name)
	}
	return errs
}

// validateDevice: a DNS label name, at most 32 attributes and capacities with valid
// names and exactly one value each, valid taints, and node fields only under
// perDeviceNodeSelection.
func validateDevice(d *resourcev1.Device, p *field.Path, perDevice bool) field.ErrorList {
	errs := draDNSLabel(d.Name, p.Child("name"))
	if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		errs = append(errs, field.Invalid(p, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	}
	for name, a := range d.Attributes {
		errs = append(errs, validateQualifiedAttributeName(string(name), p.Child("attributes"))...)
		errs = append(errs, validateDeviceAttribute(a, p.Child("attributes").Key(string(name)))...)
	}
	for name := range d.Capacity {
		errs = append(errs, validateQualifiedAttributeName(string(name), p.Child("capacity"))...)
	}
	if tooMany := draMaxItems(p.Child("taints"), len(d.Taints), resourcev1.DeviceTaintsMaxLength); tooMany != nil {
		errs = append(errs, tooMany...)
	} else {
		for i := range d.Taints {
			errs = append(errs, validateDeviceTaint(&d.Taints[i], p.Child("taints").Index(i))...)
		}
	}
	if !perDevice && (d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil) {
		errs = append(errs, field.Invalid(p, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
	}
	return errs
}

var semverRegexp = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

// validateDeviceAttribute: exactly one value; strings and versions at most 64
// characters, versions semantic versions.
func validateDeviceAttribute(a resourcev1.DeviceAttribute, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, set := range []bool{a.BoolValue != nil, a.IntValue != nil, a.StringValue != nil, a.VersionValue != nil,
		a.BoolValues != nil, a.IntValues != nil, a.StringValues != nil, a.VersionValues != nil} {
		if set {
			n++
		}
	}
	if s := a.StringValue; s != nil && len(*s) > resourcev1.DeviceAttributeMaxValueLength {
		errs = append(errs, field.TooLong(p.Child("string"), "", resourcev1.DeviceAttributeMaxValueLength))
	}
	if v := a.VersionValue; v != nil {
		if !semverRegexp.MatchString(*v) {
			errs = append(errs, field.Invalid(p.Child("version"), *v, "must be a string compatible with semver.org spec 2.0.0"))
		}
		if len(*v) > resourcev1.DeviceAttributeMaxValueLength {
			errs = append(errs, field.TooLong(p.Child("version"), "", resourcev1.DeviceAttributeMaxValueLength))
		}
	}
	switch n {
	case 0:
		errs = append(errs, field.Invalid(p, "", "exactly one value must be specified"))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, a, "exactly one value must be specified"))
	}
	return errs
}

// validateResourceSliceUpdate: the driver, the pool's name and the node do not change.
func validateResourceSliceUpdate(spec, old *resourcev1.ResourceSliceSpec, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(spec.Pool.Name, old.Pool.Name, p.Child("pool", "name"))
	errs = append(errs, apivalidation.ValidateImmutableField(spec.Driver, old.Driver, p.Child("driver"))...)
	return append(errs, apivalidation.ValidateImmutableField(spec.NodeName, old.NodeName, p.Child("nodeName"))...)
}

// validateDeviceTaintRuleSpec: the selector's driver, pool and device names and the taint.
func validateDeviceTaintRuleSpec(spec *resourcev1.DeviceTaintRuleSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := spec.DeviceSelector; s != nil {
		sp := p.Child("deviceSelector")
		if s.Driver != nil {
			errs = append(errs, validateDRADriverName(*s.Driver, sp.Child("driver"))...)
		}
		if s.Pool != nil {
			errs = append(errs, validatePoolName(*s.Pool, sp.Child("pool"))...)
		}
		if s.Device != nil {
			errs = append(errs, draDNSLabel(*s.Device, sp.Child("device"))...)
		}
	}
	return append(errs, validateDeviceTaint(&spec.Taint, p.Child("taint"))...)
}

// validateDeviceTaint: a label key, a label value and one of the effects.
func validateDeviceTaint(t *resourcev1.DeviceTaint, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelName(t.Key, p.Child("key"))
	if t.Value != "" {
		errs = append(errs, draLabelValue(t.Value, p.Child("value"))...)
	}
	switch {
	case t.Effect == "":
		errs = append(errs, field.Required(p.Child("effect"), ""))
	case !containsEffect(t.Effect):
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, validDeviceTaintEffects))
	}
	return errs
}

// validateDeviceTaintRuleStatus: at most eight valid conditions.
func validateDeviceTaintRuleStatus(s *resourcev1.DeviceTaintRuleStatus, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))
	if len(s.Conditions) > resourcev1.DeviceTaintRuleStatusMaxConditions {
		errs = append(errs, field.TooMany(p.Child("conditions"), len(s.Conditions), resourcev1.DeviceTaintRuleStatusMaxConditions))
	}
	return errs
}
