from django.apps import AppConfig


class QrelsConfig(AppConfig):
    name = "qrels"
