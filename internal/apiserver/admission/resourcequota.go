package admission

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/quota/v1/generic"

	"github.com/kubelab/kubelab/internal/util/quotaeval"
)

// quotaEvaluatorWorkers is how many namespaces' quota checks run at once.
const quotaEvaluatorWorkers = 5

// newResourceQuota is the admission step upstream calls ResourceQuota: a create (or an
// update that takes more) is refused when it would take a ResourceQuota of its namespace
// past status.hard ("exceeded quota: <name>, requested: pods=1, used: pods=3, limited:
// pods=3"), or when the quota's status has not been computed yet ("status unknown for
// quota"); an admitted request's usage is added to the quota's status.used. The
// resourcequota controller fills status and gives back what deletions free. Usage is
// measured by the controller's evaluators (pods, services, persistentvolumeclaims,
// configmaps, secrets, resourcequotas) and, for any other kind, by an object count
// (count/<resource>.<group>).
func newResourceQuota(d Deps) (*resourcequota.QuotaAdmission, error) {
	q, err := resourcequota.NewResourceQuota(nil, quotaEvaluatorWorkers)
	if err != nil {
		return nil, fmt.Errorf("admission: ResourceQuota: %w", err)
	}
	if d.Stop == nil {
		return nil, fmt.Errorf("admission: ResourceQuota: a stop channel is required")
	}
	q.SetDrainedNotification(d.Stop)
	q.SetExternalKubeClientSet(d.Client)
	q.SetExternalKubeInformerFactory(d.Factory)
	q.SetQuotaConfiguration(generic.NewConfiguration(quotaeval.Evaluators(nil), quotaeval.IgnoredResources()))
	if err := q.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("admission: ResourceQuota: %w", err)
	}
	return q, nil
}
