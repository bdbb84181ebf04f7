package overlay

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// annotationPatch returns the JSON merge patch that gives node the overlay
// annotations wanted (mac "" removes the VTEP MAC annotation, as in direct mode), or
// nil when node has them already.
func annotationPatch(node *corev1.Node, mac, nodeIP string) []byte {
	have := node.Annotations
	want := map[string]interface{}{}
	if have[AnnotationNodeIP] != nodeIP {
		want[AnnotationNodeIP] = nodeIP
	}
	if cur, ok := have[AnnotationVTEPMAC]; mac != "" && cur != mac {
		want[AnnotationVTEPMAC] = mac
	} else if mac == "" && ok {
		want[AnnotationVTEPMAC] = nil
	}
	if len(want) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"annotations": want},
	})
	return patch
}

// publish patches the overlay annotations on node when they differ, retrying when
// the write races another.
func publish(ctx context.Context, client kubernetes.Interface, node *corev1.Node, mac, nodeIP string) (bool, error) {
	patch := annotationPatch(node, mac, nodeIP)
	if patch == nil {
		return false, nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("annotate node %s: %w", node.Name, err)
	}
	return true, nil
}
