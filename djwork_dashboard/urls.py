from django.urls import path

from djwork_dashboard import views

app_name = "djwork_dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
]
