package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// FuzzRequestDecoding feeds arbitrary bodies through what a request body meets before
// storage: the JSON, YAML and protobuf decoders, defaulting, and the kind's strategy
// (PrepareForCreate, Validate, PrepareForUpdate, ValidateUpdate) and table row. Nothing
// may panic: a panic there would reach a client as a 500.
func FuzzRequestDecoding(f *testing.F) {
	resources := allResources()
	scheme, codecs, err := newScheme(resources)
	if err != nil {
		f.Fatal(err)
	}
	byKind := map[string]*resource{}
	for i := range resources {
		byKind[resources[i].gvk().String()] = &resources[i]
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	seedPod, _ := runtime.Encode(codecs.LegacyCodec(corev1.SchemeGroupVersion), &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	})
	f.Add(seedPod, uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"x"},"spec":{"resources":{"requests":{"storage":"-1"}}}}`), uint8(0))
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: -3, selector: {matchLabels: {}}}\n"), uint8(1))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Service","spec":{"type":"NodePort","ports":[{"port":99999,"nodePort":1}]}}`), uint8(0))
	f.Add([]byte("k8s\x00\x0a\x02v1\x12\x03Pod\x12\x04\x0a\x02\x0a\x00"), uint8(2))
	f.Add([]byte(`{"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","spec":{}}`), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, format uint8) {
		var obj runtime.Object
		var err error
		switch format % 3 {
		case 0, 1:
			obj, _, err = codecs.UniversalDeserializer().Decode(body, nil, nil)
		case 2:
			obj, _, err = pb.Decode(body, nil, nil)
		}
		if err != nil || obj == nil {
			return
		}
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return
		}
		r := byKind[gvks[0].String()]
		if r == nil {
			return
		}
		scheme.Default(obj)
		ctx := genericapirequest.WithNamespace(context.Background(), "default")
		st := newStrategy(scheme, r)
		old := obj.DeepCopyObject()
		st.PrepareForCreate(ctx, obj)
		_ = st.Validate(ctx, obj)
		st.PrepareForUpdate(ctx, obj, old)
		_ = st.ValidateUpdate(ctx, obj, old)
		if r.row != nil {
			_ = r.row(obj)
		}
		if r.fields != nil {
			_ = r.fields(obj)
		}
		if r.status {
			statusStrategy{st}.PrepareForUpdate(ctx, obj, old)
		}
		if r.scale {
			_, _ = scaleOf(obj)
		}
	})
}
