package driver

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// stripSecrets renders a CSI message for a log line with every field marked
// csi_secret in the spec (the Secrets maps, and any future one) replaced by a
// marker, so that no secret reaches a log.
func stripSecrets(v any) string {
	m, ok := v.(proto.Message)
	if !ok || m == nil {
		return ""
	}
	c := proto.Clone(m)
	strip(c.ProtoReflect())
	b, err := prototext.MarshalOptions{}.Marshal(c)
	if err != nil {
		return "<unprintable>"
	}
	return string(b)
}

const secretMarker = "***stripped***"

func strip(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if isSecret(fd) {
			switch {
			case fd.IsMap():
				mp := m.Mutable(fd).Map()
				var keys []protoreflect.MapKey
				mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
					keys = append(keys, k)
					return true
				})
				for _, k := range keys {
					if fd.MapValue().Kind() == protoreflect.StringKind {
						mp.Set(k, protoreflect.ValueOfString(secretMarker))
					} else {
						mp.Clear(k)
					}
				}
			case fd.Kind() == protoreflect.StringKind && !fd.IsList():
				m.Set(fd, protoreflect.ValueOfString(secretMarker))
			default:
				m.Clear(fd)
			}
			return true
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					strip(mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Kind() == protoreflect.MessageKind {
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					strip(l.Get(i).Message())
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			strip(v.Message())
		}
		return true
	})
}

func isSecret(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	if opts == nil {
		return false
	}
	s, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool)
	return ok && s
}
