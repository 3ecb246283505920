from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AssessConfig(AppConfig):
    name = "assess"

    def ready(self) -> None:
        from assess.counters import after_migrate

        post_migrate.connect(after_migrate, sender=self, dispatch_uid="assess-counter-triggers")
