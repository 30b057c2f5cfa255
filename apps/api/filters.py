import django_filters

from apps.clusters.models import Cluster
from apps.inventory.models import Disk, Node


class ClusterFilter(django_filters.FilterSet):
    user = django_filters.CharFilter(field_name="owner__username", help_text="owner's username")
    product = django_filters.CharFilter(field_name="version__product__name")
    version = django_filters.CharFilter(field_name="version__version")
    state = django_filters.MultipleChoiceFilter(choices=Cluster.State.choices)

    class Meta:
        model = Cluster
        fields = ["user", "product", "version", "state"]


class NodeFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=Node.State.choices)

    class Meta:
        model = Node
        fields = ["state"]


class DiskFilter(django_filters.FilterSet):
    node = django_filters.CharFilter(field_name="node__name")
    state = django_filters.MultipleChoiceFilter(choices=Disk.State.choices)
    kind = django_filters.MultipleChoiceFilter(choices=Disk.Kind.choices)

    class Meta:
        model = Disk
        fields = ["node", "state", "kind"]
