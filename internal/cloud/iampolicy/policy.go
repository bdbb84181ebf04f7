// Package iampolicy parses IAM policy documents and evaluates requests against them as
// IAM does for identity-based and trust policies: an explicit Deny wins, then an Allow,
// else the request is implicitly denied.
package iampolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Versions IAM accepts in a policy's Version element.
const (
	Version2012 = "2012-10-17"
	Version2008 = "2008-10-17"
)

// Document is a parsed policy.
type Document struct {
	Version    string
	Statements []Statement
}

// Statement is one element of a policy's Statement.
type Statement struct {
	Sid    string
	Effect string // Allow or Deny
	// Principal maps a principal type (AWS, Federated, Service, or "*" for everyone) to
	// its values; nil when the statement names none (identity-based policies).
	Principal   map[string][]string
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	// Condition maps an operator (StringEquals, StringLikeIfExists, …) to its keys and
	// their values.
	Condition map[string]map[string][]string
}

// Request is what is evaluated: who (for trust policies), which action on which
// resource, and the request's condition keys (matched without regard to case).
type Request struct {
	// PrincipalType and Principal name the caller as a trust policy's Principal element
	// does ("Federated" and an OIDC provider's ARN); empty for identity-based policies.
	PrincipalType, Principal string
	Action                   string
	Resource                 string
	Context                  map[string][]string
}

// Decision is the outcome of an evaluation.
type Decision int

const (
	// ImplicitDeny: no statement allows the request.
	ImplicitDeny Decision = iota
	// Allow: a statement allows it and none denies it.
	Allow
	// ExplicitDeny: a statement denies it.
	ExplicitDeny
)

func (d Decision) String() string {
	return [...]string{"ImplicitDeny", "Allow", "ExplicitDeny"}[d]
}

// Error is a policy document that IAM would refuse (MalformedPolicyDocument).
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func malformed(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// ParseOptions says which kind of policy is parsed.
type ParseOptions struct {
	// Trust: a role's trust policy, whose statements must name a Principal and need no
	// Resource. Identity-based policies must not name a Principal and need a Resource.
	Trust bool
}

// Parse reads a policy document as IAM does and reports the first problem as an *Error.
func Parse(text string, opt ParseOptions) (*Document, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed("Syntax errors in policy.")
	}
	if dec.More() {
		return nil, malformed("Syntax errors in policy.")
	}
	doc := &Document{}
	for k, v := range raw {
		switch k {
		case "Version":
			if err := json.Unmarshal(v, &doc.Version); err != nil {
				return nil, malformed("Syntax errors in policy.")
			}
		case "Id", "Statement":
		default:
			return nil, malformed("Policy document contains an unknown element %s.", k)
		}
	}
	if doc.Version != "" && doc.Version != Version2012 && doc.Version != Version2008 {
		return nil, malformed("The policy document Version %s is not valid.", doc.Version)
	}
	stmts, ok := raw["Statement"]
	if !ok {
		return nil, malformed("Missing required field Statement")
	}
	var list []json.RawMessage
	if t := bytes.TrimSpace(stmts); len(t) > 0 && t[0] == '{' {
		list = []json.RawMessage{stmts}
	} else if err := json.Unmarshal(stmts, &list); err != nil {
		return nil, malformed("Syntax errors in policy.")
	}
	if len(list) == 0 {
		return nil, malformed("Missing required field Statement")
	}
	for _, s := range list {
		st, err := parseStatement(s, opt)
		if err != nil {
			return nil, err
		}
		doc.Statements = append(doc.Statements, st)
	}
	return doc, nil
}

func parseStatement(data json.RawMessage, opt ParseOptions) (Statement, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Statement{}, malformed("Syntax errors in policy.")
	}
	var st Statement
	for k, v := range raw {
		var err error
		switch k {
		case "Sid":
			err = json.Unmarshal(v, &st.Sid)
		case "Effect":
			err = json.Unmarshal(v, &st.Effect)
		case "Principal":
			st.Principal, err = parsePrincipal(v)
		case "Action":
			st.Action, err = stringOrList(v)
		case "NotAction":
			st.NotAction, err = stringOrList(v)
		case "Resource":
			st.Resource, err = stringOrList(v)
		case "NotResource":
			st.NotResource, err = stringOrList(v)
		case "Condition":
			st.Condition, err = parseCondition(v)
		default:
			return st, malformed("Statement contains an unknown element %s.", k)
		}
		if err != nil {
			if errors.As(err, new(*Error)) {
				return st, err
			}
			return st, malformed("Syntax errors in policy.")
		}
	}
	switch {
	case st.Effect != "Allow" && st.Effect != "Deny":
		return st, malformed("Invalid effect: %s", st.Effect)
	case len(st.Action) == 0 && len(st.NotAction) == 0:
		return st, malformed("Policy statement must contain actions.")
	case len(st.Action) > 0 && len(st.NotAction) > 0:
		return st, malformed("Statement contains both Action and NotAction.")
	case len(st.Resource) > 0 && len(st.NotResource) > 0:
		return st, malformed("Statement contains both Resource and NotResource.")
	case opt.Trust && st.Principal == nil:
		return st, malformed("Missing required field Principal")
	}
	if opt.Trust {
		if len(st.Resource) > 0 || len(st.NotResource) > 0 {
			return st, malformed("Has prohibited field Resource")
		}
	} else {
		if st.Principal != nil {
			return st, malformed("Policy document should not specify a principal.")
		}
		if len(st.Resource) == 0 && len(st.NotResource) == 0 {
			return st, malformed("Policy statement must contain resources.")
		}
	}
	for _, a := range append(append([]string(nil), st.Action...), st.NotAction...) {
		if a != "*" && !strings.Contains(a, ":") {
			return st, malformed("Actions/Conditions must be prefaced by a vendor, e.g., iam, sdb, ec2, etc.")
		}
	}
	for op := range st.Condition {
		if _, ok := operator(op); !ok {
			return st, malformed("Invalid Condition type : %s.", op)
		}
	}
	return st, nil
}

// stringOrList reads a JSON string or array of strings.
func stringOrList(v json.RawMessage) ([]string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(v, &l); err != nil {
		return nil, err
	}
	return l, nil
}

func parsePrincipal(v json.RawMessage) (map[string][]string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		if s != "*" {
			return nil, malformed("Invalid principal in policy: %q", s)
		}
		return map[string][]string{"*": {"*"}}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for typ, vals := range m {
		switch typ {
		case "AWS", "Federated", "Service", "CanonicalUser":
		default:
			return nil, malformed("Invalid principal in policy: %q", typ)
		}
		l, err := stringOrList(vals)
		if err != nil {
			return nil, err
		}
		out[typ] = l
	}
	return out, nil
}

func parseCondition(v json.RawMessage) (map[string]map[string][]string, error) {
	var m map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	out := map[string]map[string][]string{}
	for op, keys := range m {
		out[op] = map[string][]string{}
		for k, raw := range keys {
			var vals []string
			var items []any
			if err := json.Unmarshal(raw, &items); err != nil {
				var one any
				if err := json.Unmarshal(raw, &one); err != nil {
					return nil, err
				}
				items = []any{one}
			}
			for _, x := range items {
				switch x := x.(type) {
				case string:
					vals = append(vals, x)
				case bool:
					vals = append(vals, fmt.Sprint(x))
				case float64:
					vals = append(vals, fmt.Sprint(x))
				default:
					return nil, malformed("Condition value of %s must be a string, number or boolean.", k)
				}
			}
			out[op][k] = vals
		}
	}
	return out, nil
}

// Evaluate decides req against the statements of docs together.
func Evaluate(req Request, docs ...*Document) Decision {
	ctx := make(map[string][]string, len(req.Context))
	for k, v := range req.Context {
		ctx[strings.ToLower(k)] = v
	}
	out := ImplicitDeny
	for _, d := range docs {
		if d == nil {
			continue
		}
		for _, st := range d.Statements {
			if !st.applies(req, ctx) {
				continue
			}
			if st.Effect == "Deny" {
				return ExplicitDeny
			}
			out = Allow
		}
	}
	return out
}

func (st *Statement) applies(req Request, ctx map[string][]string) bool {
	if st.Principal != nil && !principalMatches(st.Principal, req) {
		return false
	}
	if len(st.Action) > 0 && !anyMatch(st.Action, req.Action, true) {
		return false
	}
	if len(st.NotAction) > 0 && anyMatch(st.NotAction, req.Action, true) {
		return false
	}
	if len(st.Resource) > 0 && !anyMatch(st.Resource, req.Resource, false) {
		return false
	}
	if len(st.NotResource) > 0 && anyMatch(st.NotResource, req.Resource, false) {
		return false
	}
	for op, keys := range st.Condition {
		for key, vals := range keys {
			if !conditionHolds(op, vals, ctx[strings.ToLower(key)], hasKey(ctx, key)) {
				return false
			}
		}
	}
	return true
}

func hasKey(ctx map[string][]string, key string) bool {
	_, ok := ctx[strings.ToLower(key)]
	return ok
}

func principalMatches(p map[string][]string, req Request) bool {
	if _, ok := p["*"]; ok {
		return true
	}
	for _, v := range p[req.PrincipalType] {
		if v == "*" || v == req.Principal {
			return true
		}
	}
	return false
}

func anyMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			if Match(strings.ToLower(p), strings.ToLower(s)) {
				return true
			}
		} else if Match(p, s) {
			return true
		}
	}
	return false
}

// Match reports whether s matches the IAM wildcard pattern p: * is any run of
// characters, ? any one character.
func Match(p, s string) bool {
	// Iterative matching with backtracking to the last star.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// op is a condition operator: how one context value compares to one policy value, and
// whether the operator is negated (true when no value matches).
type op struct {
	cmp     func(policy, value string) bool
	negated bool
}

var operators = map[string]op{
	"StringEquals":              {cmp: func(p, v string) bool { return p == v }},
	"StringNotEquals":           {cmp: func(p, v string) bool { return p == v }, negated: true},
	"StringEqualsIgnoreCase":    {cmp: strings.EqualFold},
	"StringNotEqualsIgnoreCase": {cmp: strings.EqualFold, negated: true},
	"StringLike":                {cmp: Match},
	"StringNotLike":             {cmp: Match, negated: true},
	"ArnEquals":                 {cmp: func(p, v string) bool { return p == v }},
	"ArnNotEquals":              {cmp: func(p, v string) bool { return p == v }, negated: true},
	"ArnLike":                   {cmp: Match},
	"ArnNotLike":                {cmp: Match, negated: true},
	"Bool":                      {cmp: strings.EqualFold},
}

// operator looks up name, with or without the IfExists suffix.
func operator(name string) (op, bool) {
	if name == "Null" {
		return op{}, true
	}
	o, ok := operators[strings.TrimSuffix(name, "IfExists")]
	return o, ok
}

// conditionHolds evaluates one condition key: the request's values against the policy's.
// A key absent from the request fails a positive operator and satisfies a negated one;
// the IfExists forms hold when the key is absent.
func conditionHolds(name string, policyVals, ctxVals []string, present bool) bool {
	if name == "Null" {
		for _, p := range policyVals {
			if strings.EqualFold(p, "true") != !present {
				return false
			}
		}
		return true
	}
	o, _ := operator(name)
	if !present {
		return strings.HasSuffix(name, "IfExists") || o.negated
	}
	matched := false
	for _, v := range ctxVals {
		for _, p := range policyVals {
			if o.cmp(p, v) {
				matched = true
			}
		}
	}
	return matched != o.negated
}
