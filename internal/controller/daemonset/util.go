package daemonset

import "k8s.io/apimachinery/pkg/util/intstr"

func intstrScaled(v *intstr.IntOrString, total int) (int, error) {
	return intstr.GetScaledValueFromIntOrPercent(v, total, true)
}
