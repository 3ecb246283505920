app_name = "qrels"

urlpatterns: list = []
