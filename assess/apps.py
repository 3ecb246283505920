from django.apps import AppConfig


class AssessConfig(AppConfig):
    name = "assess"
