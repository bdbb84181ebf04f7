package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
	streamproxy "k8s.io/apiserver/pkg/util/proxy"
)

// The pods' log, exec, attach and portforward subresources are served by the kubelet of
// the pod's node: the API server checks the request against the pod, then proxies it to
// https://<node>:<kubelet port>/{containerLogs,exec,attach,portForward}/<namespace>/<pod>/….
// Exec and attach arrive as SPDY upgrades (POST) or, from kubectl ≥1.30, as WebSocket
// upgrades with the v5.channel.k8s.io protocol (GET), which the API server translates into
// SPDY toward the kubelet; port-forward arrives as SPDY or as SPDY tunnelled in a
// WebSocket (kubectl ≥1.31), which the API server unwraps. Kubelets only ever see SPDY.

// podStreams is what the four subresources share: the pod store and the way to kubelets.
type podStreams struct {
	pods    *genericregistry.Store
	kubelet *kubeletClient
}

// pod gets the pod.
func (p podStreams) pod(ctx context.Context, name string) (*corev1.Pod, error) {
	obj, err := p.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a Pod: %T", obj)
	}
	return pod, nil
}

// nodeLocation is the kubelet URL of the pod's node with path and query.
func (p podStreams) nodeLocation(ctx context.Context, pod *corev1.Pod, path string, query url.Values) (*url.URL, error) {
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	loc, err := p.kubelet.location(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	loc.Path = path
	loc.RawQuery = query.Encode()
	return loc, nil
}

// podContainer picks the container a request is about: the named one, which the pod
// must have (app, init or ephemeral container), or the pod's only app container.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		var names []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " "))
		if len(pod.Spec.InitContainers) > 0 {
			var init []string
			for _, c := range pod.Spec.InitContainers {
				init = append(init, c.Name)
			}
			msg += fmt.Sprintf(" or one of the init containers: [%s]", strings.Join(init, " "))
		}
		return "", apierrors.NewBadRequest(msg)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return name, nil
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return name, nil
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// logREST serves pods/log (GET), streaming the kubelet's answer.
type logREST struct{ podStreams }

var (
	_ rest.GetterWithOptions = &logREST{}
	_ rest.StorageMetadata   = &logREST{}
)

func (r *logREST) New() runtime.Object   { return &corev1.Pod{} }
func (r *logREST) Destroy()              {}
func (r *logREST) NamespaceScoped() bool { return true }

// ProducesMIMETypes lets clients ask for text/plain.
func (r *logREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }
func (r *logREST) ProducesObject(string) interface{} { return "" }

func (r *logREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

func (r *logREST) Get(ctx context.Context, name string, options runtime.Object) (runtime.Object, error) {
	opts, ok := options.(*corev1.PodLogOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	container, err := podContainer(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		// No node, no logs yet: an empty answer.
		return &genericrest.LocationStreamer{}, nil
	}
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	if opts.Stream != nil {
		q.Set("stream", *opts.Stream)
	}
	loc, err := r.nodeLocation(ctx, pod, fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container), q)
	if err != nil {
		return nil, err
	}
	return &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       r.kubelet.transport,
		ContentType:     "text/plain",
		Flush:           opts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}, nil
}

// validatePodLogOptions checks what the kubelet cannot be asked.
func validatePodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	}
	if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.Stream != nil {
		switch *o.Stream {
		case corev1.LogStreamStdout, corev1.LogStreamStderr:
			if o.TailLines != nil {
				errs = append(errs, field.Forbidden(field.NewPath(""), "`tailLines` and specific `stream` are mutually exclusive for now"))
			}
		case corev1.LogStreamAll:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("stream"), *o.Stream,
				[]string{corev1.LogStreamStdout, corev1.LogStreamStderr, corev1.LogStreamAll}))
		}
	}
	return errs
}

// upgradeMethods are the methods exec, attach and portforward are reached with.
var upgradeMethods = []string{http.MethodGet, http.MethodPost}

// streamQuery is the kubelet's query for an exec or attach.
func streamQuery(stdin, stdout, stderr, tty bool, command []string) url.Values {
	q := url.Values{}
	for _, c := range command {
		q.Add("command", c)
	}
	for k, on := range map[string]bool{"input": stdin, "output": stdout, "error": stderr, "tty": tty} {
		if on {
			q.Set(k, "1")
		}
	}
	return q
}

// remoteCommandHandler proxies an exec or attach: SPDY upgrades as they are, WebSocket
// v5.channel.k8s.io ones translated into SPDY.
func (p podStreams) remoteCommandHandler(loc *url.URL, responder rest.Responder, stdin, stdout, stderr, tty bool) http.Handler {
	upgrade := proxy.NewUpgradeAwareHandler(loc, p.kubelet.transport, false, true, proxy.NewErrorResponder(responder))
	translator := streamproxy.NewStreamTranslatorHandler(loc, p.kubelet.transport, 0,
		streamproxy.Options{Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty})
	return streamproxy.NewTranslatingHandler(upgrade, translator, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
}

// execREST serves pods/exec.
type execREST struct{ podStreams }

var _ rest.Connecter = &execREST{}

func (r *execREST) New() runtime.Object      { return &corev1.PodExecOptions{} }
func (r *execREST) Destroy()                 {}
func (r *execREST) NamespaceScoped() bool    { return true }
func (r *execREST) ConnectMethods() []string { return upgradeMethods }
func (r *execREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodExecOptions{}, false, ""
}

func (r *execREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodExecOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	container, err := podContainer(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	loc, err := r.nodeLocation(ctx, pod, fmt.Sprintf("/exec/%s/%s/%s", pod.Namespace, pod.Name, container),
		streamQuery(opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY, opts.Command))
	if err != nil {
		return nil, err
	}
	return r.remoteCommandHandler(loc, responder, opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY), nil
}

// attachREST serves pods/attach.
type attachREST struct{ podStreams }

var _ rest.Connecter = &attachREST{}

func (r *attachREST) New() runtime.Object      { return &corev1.PodAttachOptions{} }
func (r *attachREST) Destroy()                 {}
func (r *attachREST) NamespaceScoped() bool    { return true }
func (r *attachREST) ConnectMethods() []string { return upgradeMethods }
func (r *attachREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodAttachOptions{}, false, ""
}

func (r *attachREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodAttachOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	container, err := podContainer(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	loc, err := r.nodeLocation(ctx, pod, fmt.Sprintf("/attach/%s/%s/%s", pod.Namespace, pod.Name, container),
		streamQuery(opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY, nil))
	if err != nil {
		return nil, err
	}
	return r.remoteCommandHandler(loc, responder, opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY), nil
}

// portForwardREST serves pods/portforward.
type portForwardREST struct{ podStreams }

var _ rest.Connecter = &portForwardREST{}

func (r *portForwardREST) New() runtime.Object      { return &corev1.PodPortForwardOptions{} }
func (r *portForwardREST) Destroy()                 {}
func (r *portForwardREST) NamespaceScoped() bool    { return true }
func (r *portForwardREST) ConnectMethods() []string { return upgradeMethods }
func (r *portForwardREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodPortForwardOptions{}, false, ""
}

func (r *portForwardREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodPortForwardOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	pod, err := r.pod(ctx, name)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if len(opts.Ports) > 0 {
		ports := make([]string, len(opts.Ports))
		for i, p := range opts.Ports {
			if p < 1 || p > 65535 {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("port %d is out of range", p))
			}
			ports[i] = strconv.Itoa(int(p))
		}
		q.Set("ports", strings.Join(ports, ","))
	}
	loc, err := r.nodeLocation(ctx, pod, fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name), q)
	if err != nil {
		return nil, err
	}
	upgrade := proxy.NewUpgradeAwareHandler(loc, r.kubelet.transport, false, true, proxy.NewErrorResponder(responder))
	return streamproxy.NewTranslatingHandler(upgrade, streamproxy.NewTunnelingHandler(upgrade),
		wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}

// addPodOptionsConversions lets the server read the four subresources' options from
// query parameters, as the API names them.
func addPodOptionsConversions(scheme *runtime.Scheme) error {
	add := func(out interface{}, fn func(q url.Values, out interface{}) error) error {
		return scheme.AddConversionFunc((*url.Values)(nil), out, func(a, b interface{}, _ conversion.Scope) error {
			return fn(*a.(*url.Values), b)
		})
	}
	for _, err := range []error{
		add((*corev1.PodLogOptions)(nil), func(q url.Values, out interface{}) error {
			o := out.(*corev1.PodLogOptions)
			d := queryDecoder{q: q}
			d.str("container", &o.Container)
			d.boolean("follow", &o.Follow)
			d.boolean("previous", &o.Previous)
			d.int64p("sinceSeconds", &o.SinceSeconds)
			d.timep("sinceTime", &o.SinceTime)
			d.boolean("timestamps", &o.Timestamps)
			d.int64p("tailLines", &o.TailLines)
			d.int64p("limitBytes", &o.LimitBytes)
			d.boolean("insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend)
			d.strp("stream", &o.Stream)
			return d.err
		}),
		add((*corev1.PodExecOptions)(nil), func(q url.Values, out interface{}) error {
			o := out.(*corev1.PodExecOptions)
			d := queryDecoder{q: q}
			d.boolean("stdin", &o.Stdin)
			d.boolean("stdout", &o.Stdout)
			d.boolean("stderr", &o.Stderr)
			d.boolean("tty", &o.TTY)
			d.str("container", &o.Container)
			if v, ok := q["command"]; ok {
				o.Command = append([]string(nil), v...)
			}
			return d.err
		}),
		add((*corev1.PodAttachOptions)(nil), func(q url.Values, out interface{}) error {
			o := out.(*corev1.PodAttachOptions)
			d := queryDecoder{q: q}
			d.boolean("stdin", &o.Stdin)
			d.boolean("stdout", &o.Stdout)
			d.boolean("stderr", &o.Stderr)
			d.boolean("tty", &o.TTY)
			d.str("container", &o.Container)
			return d.err
		}),
		add((*corev1.PodPortForwardOptions)(nil), func(q url.Values, out interface{}) error {
			o := out.(*corev1.PodPortForwardOptions)
			if v, ok := q["ports"]; ok {
				return metav1.Convert_Slice_string_To_Slice_int32(&v, &o.Ports, nil)
			}
			return nil
		}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// queryDecoder reads query parameters into option fields with the API's rules for each
// type; the first error sticks. Parameters not in the query leave their field alone.
type queryDecoder struct {
	q   url.Values
	err error
}

func (d *queryDecoder) get(key string) ([]string, bool) {
	v, ok := d.q[key]
	return v, ok && d.err == nil
}

func (d *queryDecoder) str(key string, out *string) {
	if v, ok := d.get(key); ok {
		d.err = runtime.Convert_Slice_string_To_string(&v, out, nil)
	}
}

func (d *queryDecoder) strp(key string, out **string) {
	if v, ok := d.get(key); ok && len(v) > 0 {
		s := v[0]
		*out = &s
	}
}

func (d *queryDecoder) boolean(key string, out *bool) {
	if v, ok := d.get(key); ok {
		d.err = runtime.Convert_Slice_string_To_bool(&v, out, nil)
	}
}

func (d *queryDecoder) int64p(key string, out **int64) {
	if v, ok := d.get(key); ok {
		if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, out, nil); err != nil {
			d.err = fmt.Errorf("%s: %w", key, err)
		}
	}
}

func (d *queryDecoder) timep(key string, out **metav1.Time) {
	if v, ok := d.get(key); ok {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, out, nil); err != nil {
			d.err = fmt.Errorf("%s: %w", key, err)
		}
	}
}
