package apiserver

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The review APIs answer a question in the response to a create and store nothing:
// authentication.k8s.io's TokenReview (who is this token?) and SelfSubjectReview (who
// am I?), authorization.k8s.io's SubjectAccessReview, LocalSubjectAccessReview and
// SelfSubjectAccessReview (may this user do this?) and SelfSubjectRulesReview (what
// may I do in this namespace?). kubectl's `auth whoami` and `auth can-i [--list]` use
// them, as do webhooks and components that delegate authentication or authorization.

// reviewREST is a create-only endpoint that answers with review(ctx, obj).
type reviewREST struct {
	newObj     func() runtime.Object
	singular   string
	namespaced bool
	review     func(ctx context.Context, obj runtime.Object) (runtime.Object, error)
}

var (
	_ rest.Creater              = (*reviewREST)(nil)
	_ rest.Scoper               = (*reviewREST)(nil)
	_ rest.SingularNameProvider = (*reviewREST)(nil)
)

func (r *reviewREST) New() runtime.Object     { return r.newObj() }
func (r *reviewREST) Destroy()                {}
func (r *reviewREST) NamespaceScoped() bool   { return r.namespaced }
func (r *reviewREST) GetSingularName() string { return r.singular }

func (r *reviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	return r.review(ctx, obj)
}

// reviews are the review endpoints by API group and resource path.
func reviews(authz authorizer.Authorizer, rules authorizer.RuleResolver, tokens authenticator.Token) map[string]map[string]rest.Storage {
	return map[string]map[string]rest.Storage{
		authenticationv1.GroupName: {
			"tokenreviews": &reviewREST{newObj: func() runtime.Object { return &authenticationv1.TokenReview{} }, singular: "tokenreview",
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					return tokenReview(ctx, tokens, obj.(*authenticationv1.TokenReview))
				}},
			"selfsubjectreviews": &reviewREST{newObj: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, singular: "selfsubjectreview",
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					u, err := requestUser(ctx)
					if err != nil {
						return nil, err
					}
					r := obj.(*authenticationv1.SelfSubjectReview)
					r.Status.UserInfo = userInfo(u)
					return r, nil
				}},
		},
		authorizationv1.GroupName: {
			"subjectaccessreviews": &reviewREST{newObj: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, singular: "subjectaccessreview",
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					r := obj.(*authorizationv1.SubjectAccessReview)
					if errs := validateSubjectAccessReviewSpec(r.Spec, field.NewPath("spec"), true); len(errs) > 0 {
						return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview").GroupKind(), "", errs)
					}
					r.Status = accessReview(ctx, authz, specUser(r.Spec), r.Spec)
					return r, nil
				}},
			"localsubjectaccessreviews": &reviewREST{newObj: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
				singular: "localsubjectaccessreview", namespaced: true,
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					r := obj.(*authorizationv1.LocalSubjectAccessReview)
					errs := validateSubjectAccessReviewSpec(r.Spec, field.NewPath("spec"), true)
					ns, _ := genericapirequest.NamespaceFrom(ctx)
					if r.Spec.ResourceAttributes != nil && r.Spec.ResourceAttributes.Namespace != ns {
						errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), r.Spec.ResourceAttributes.Namespace,
							"must match the namespace of the request: "+ns))
					}
					if len(errs) > 0 {
						return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview").GroupKind(), "", errs)
					}
					r.Status = accessReview(ctx, authz, specUser(r.Spec), r.Spec)
					return r, nil
				}},
			"selfsubjectaccessreviews": &reviewREST{newObj: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, singular: "selfsubjectaccessreview",
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					r := obj.(*authorizationv1.SelfSubjectAccessReview)
					spec := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: r.Spec.ResourceAttributes, NonResourceAttributes: r.Spec.NonResourceAttributes}
					if errs := validateSubjectAccessReviewSpec(spec, field.NewPath("spec"), false); len(errs) > 0 {
						return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "", errs)
					}
					u, err := requestUser(ctx)
					if err != nil {
						return nil, err
					}
					r.Status = accessReview(ctx, authz, u, spec)
					return r, nil
				}},
			"selfsubjectrulesreviews": &reviewREST{newObj: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, singular: "selfsubjectrulesreview",
				review: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
					r := obj.(*authorizationv1.SelfSubjectRulesReview)
					if r.Spec.Namespace == "" {
						return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview").GroupKind(), "",
							field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "")})
					}
					u, err := requestUser(ctx)
					if err != nil {
						return nil, err
					}
					r.Status = rulesReview(ctx, rules, u, r.Spec.Namespace)
					return r, nil
				}},
		},
	}
}

func requestUser(ctx context.Context) (user.Info, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user in the request")
	}
	return u, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	return info
}

// tokenReview authenticates spec.token for spec.audiences (the server's when empty) as
// a request bearing it would be: through the bearer-token authenticators and then the
// group system:authenticated every authenticated user is in.
func tokenReview(ctx context.Context, tokens authenticator.Token, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	if r.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	if len(r.Spec.Audiences) > 0 {
		ctx = authenticator.WithAudiences(ctx, r.Spec.Audiences)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.Spec.Token)
	resp, ok, err := group.NewAuthenticatedGroupAdder(bearertoken.New(tokens)).AuthenticateRequest(req)
	r.Status = authenticationv1.TokenReviewStatus{Authenticated: ok && err == nil}
	if err != nil {
		r.Status.Error = err.Error()
	}
	if r.Status.Authenticated {
		r.Status.User = userInfo(resp.User)
		r.Status.Audiences = resp.Audiences
	}
	return r, nil
}

// specUser is the user a SubjectAccessReview asks about.
func specUser(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	extra := map[string][]string{}
	for k, v := range spec.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
}

// accessReview asks authz whether u may do what spec describes.
func accessReview(ctx context.Context, authz authorizer.Authorizer, u user.Info, spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	attrs := authorizer.AttributesRecord{User: u}
	if ra := spec.ResourceAttributes; ra != nil {
		attrs.ResourceRequest = true
		attrs.Verb, attrs.Namespace, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
		attrs.Resource, attrs.Subresource, attrs.Name = ra.Resource, ra.Subresource, ra.Name
	} else if nra := spec.NonResourceAttributes; nra != nil {
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	decision, reason, err := authz.Authorize(ctx, attrs)
	status := authorizationv1.SubjectAccessReviewStatus{Allowed: decision == authorizer.DecisionAllow,
		Denied: decision == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return status
}

// rulesReview lists what u may do in namespace.
func rulesReview(ctx context.Context, rules authorizer.RuleResolver, u user.Info, namespace string) authorizationv1.SubjectRulesReviewStatus {
	res, nonRes, incomplete, err := rules.RulesFor(ctx, u, namespace)
	status := authorizationv1.SubjectRulesReviewStatus{Incomplete: incomplete,
		ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range res {
		status.ResourceRules = append(status.ResourceRules, authorizationv1.ResourceRule{Verbs: r.GetVerbs(),
			APIGroups: r.GetAPIGroups(), Resources: r.GetResources(), ResourceNames: r.GetResourceNames()})
	}
	for _, r := range nonRes {
		status.NonResourceRules = append(status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.GetVerbs(),
			NonResourceURLs: r.GetNonResourceURLs()})
	}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return status
}

// validateSubjectAccessReviewSpec: exactly one of resourceAttributes and
// nonResourceAttributes, and (for reviews about another user) a user or a group.
func validateSubjectAccessReviewSpec(spec authorizationv1.SubjectAccessReviewSpec, path *field.Path, needUser bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		errs = append(errs, field.Invalid(path.Child("nonResourceAttributes"), spec.NonResourceAttributes,
			"cannot be specified in combination with resourceAttributes"))
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		errs = append(errs, field.Invalid(path.Child("resourceAttributes"), spec.NonResourceAttributes,
			"exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if needUser && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(path.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}
